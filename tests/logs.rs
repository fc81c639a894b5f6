//! Logs and start-up as operators expect them: no colour codes where the output is not a terminal,
//! `--logging-format json` as kube's components offer it, and an etcd that does not answer at start
//! named and waited for rather than a bare exit.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, TestEtcd};
use serde_json::Value;

/// `kgate serve` on a free port in a fresh data dir, its logs going to a file (not a terminal).
fn spawn(extra: &[&str]) -> (Child, tempfile::TempDir, std::path::PathBuf, u16) {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let log = dir.path().join("kgate.log");
    let child = Command::new(env!("CARGO_BIN_EXE_kgate"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(dir.path())
        .args(extra)
        .current_dir(dir.path())
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    (child, dir, log, port)
}

/// Wait until kgate accepts connections and has logged that it serves.
fn wait_serving(child: &mut Child, port: u16, log: &std::path::Path, secs: u64) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let logged = || std::fs::read_to_string(log).unwrap_or_default().contains("kgate is serving");
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() || !logged() {
        assert!(child.try_wait().unwrap().is_none(), "kgate exited: {}", std::fs::read_to_string(log).unwrap());
        assert!(Instant::now() < deadline, "kgate did not serve within {secs}s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn text_logs_carry_no_colour_codes_off_a_terminal_and_json_logs_are_one_object_a_line() {
    let (mut text, _dir, log, port) = spawn(&[]);
    wait_serving(&mut text, port, &log, 60);
    text.kill().unwrap();
    let _ = text.wait();
    let written = std::fs::read(&log).unwrap();
    assert!(!written.is_empty(), "kgate logs at start");
    assert!(!written.contains(&0x1b), "no ANSI escape codes in a log file: {}", String::from_utf8_lossy(&written));
    assert!(String::from_utf8_lossy(&written).contains("INFO"));

    let (mut json, _dir, log, port) = spawn(&["--logging-format", "json"]);
    wait_serving(&mut json, port, &log, 60);
    json.kill().unwrap();
    let _ = json.wait();
    let written = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = written.lines().collect();
    assert!(!lines.is_empty());
    for line in lines {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert!(v["timestamp"].is_string() && v["level"].is_string() && v["message"].is_string(), "{line}");
    }
}

#[test]
fn an_etcd_that_does_not_answer_at_start_is_named_and_waited_for() {
    let mut etcd = TestEtcd::start();
    let endpoint = etcd.endpoint.clone();
    etcd.stop();
    let (mut kgate, _dir, log, port) = spawn(&["--etcd-servers", &endpoint, "--logging-format", "json"]);
    // Tries back off from half a second: several in 4 s, each naming the endpoint, and no exit.
    std::thread::sleep(Duration::from_secs(4));
    let written = std::fs::read_to_string(&log).unwrap();
    assert!(kgate.try_wait().unwrap().is_none(), "kgate waits for etcd instead of exiting: {written}");
    let tries: Vec<Value> = written
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["message"] == "etcd does not answer; trying again")
        .collect();
    assert!(tries.len() >= 2, "retries logged: {written}");
    assert_eq!(tries[0]["endpoints"], endpoint.as_str(), "{}", tries[0]);
    assert_eq!(tries[0]["level"], "WARN");
    etcd.restart();
    wait_serving(&mut kgate, port, &log, 60);
    kgate.kill().unwrap();
    let _ = kgate.wait();
}
