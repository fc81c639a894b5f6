//! The `kgate` command: `serve` runs the server; the other commands talk to a running one.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "kgate", version, about = "Serve the Kubernetes API for many logical clusters")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server.
    Serve(ServeArgs),
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Address to listen on (HTTPS).
    #[arg(long, default_value = "127.0.0.1:6443")]
    listen: std::net::SocketAddr,
    /// Directory for the embedded store, the PKI and admin.kubeconfig.
    #[arg(long, default_value = "./kgate-data")]
    data_dir: PathBuf,
    /// etcd endpoints (comma-separated URLs); without it the embedded store is used.
    #[arg(long, value_delimiter = ',')]
    etcd_servers: Vec<String>,
    /// Key prefix of every object.
    #[arg(long, default_value = "/registry")]
    etcd_prefix: String,
    /// CA bundle for etcd's serving certificate.
    #[arg(long)]
    etcd_cafile: Option<PathBuf>,
    /// Client certificate for etcd.
    #[arg(long)]
    etcd_certfile: Option<PathBuf>,
    /// Client key for etcd.
    #[arg(long)]
    etcd_keyfile: Option<PathBuf>,
    /// Serving certificate (PEM) instead of the generated one.
    #[arg(long)]
    tls_cert_file: Option<PathBuf>,
    /// Serving key (PEM) for --tls-cert-file.
    #[arg(long)]
    tls_key_file: Option<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let rt = tokio::runtime::Runtime::new()?;
    match cli.command {
        Command::Serve(a) => rt.block_on(serve(a)),
    }
}

async fn serve(a: ServeArgs) -> anyhow::Result<()> {
    let config = kgate::config::Config {
        listen: a.listen,
        data_dir: a.data_dir,
        etcd_servers: a.etcd_servers,
        etcd_prefix: a.etcd_prefix,
        etcd_tls: kgate::storage::etcd::EtcdTls {
            ca_file: a.etcd_cafile,
            cert_file: a.etcd_certfile,
            key_file: a.etcd_keyfile,
        },
        tls_cert_file: a.tls_cert_file,
        tls_key_file: a.tls_key_file,
        ..Default::default()
    };
    let running = kgate::server::start(config).await?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down");
    let _ = running.shutdown.send(true);
    let _ = running.done.await;
    Ok(())
}
