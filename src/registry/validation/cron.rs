//! A CronJob's schedule and time zone as kube checks them: the schedule by the grammar of the cron
//! library kube uses (robfig/cron v3's standard parser: five fields or a descriptor), its error words
//! kept, since kube returns them to the user as they are; the time zone by the IANA database.
//!
//! Written here rather than taken from a cron crate: the crates at hand accept what kube refuses
//! (seconds fields, `L`, `W`, `#`) and word their errors otherwise.

use std::str::FromStr;

/// One field's bounds, and the names it takes for numbers.
struct Bounds {
    min: u64,
    max: u64,
    names: &'static [(&'static str, u64)],
}

const MINUTES: Bounds = Bounds { min: 0, max: 59, names: &[] };
const HOURS: Bounds = Bounds { min: 0, max: 23, names: &[] };
const DAYS_OF_MONTH: Bounds = Bounds { min: 1, max: 31, names: &[] };
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        ("jan", 1),
        ("feb", 2),
        ("mar", 3),
        ("apr", 4),
        ("may", 5),
        ("jun", 6),
        ("jul", 7),
        ("aug", 8),
        ("sep", 9),
        ("oct", 10),
        ("nov", 11),
        ("dec", 12),
    ],
};
const DAYS_OF_WEEK: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &[("sun", 0), ("mon", 1), ("tue", 2), ("wed", 3), ("thu", 4), ("fri", 5), ("sat", 6)],
};

/// Why `spec` is no schedule, in robfig/cron's words, or `None` when it is one.
pub(super) fn schedule_error(spec: &str) -> Option<String> {
    if spec.is_empty() {
        return Some("empty spec string".to_string());
    }
    let mut spec = spec;
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        // The location runs to the first space; a schedule of nothing but a location has none.
        let eq = spec.find('=').unwrap_or(0);
        let Some(space) = spec.find(' ') else {
            return Some(format!("provided bad location {}: unknown time zone {}", &spec[eq + 1..], &spec[eq + 1..]));
        };
        let location = &spec[eq + 1..space];
        if let Some(e) = location_error(location) {
            return Some(format!("provided bad location {location}: {e}"));
        }
        spec = spec[space..].trim();
    }
    if spec.starts_with('@') {
        return descriptor_error(spec);
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Some(format!("expected exactly 5 fields, found {}: [{}]", fields.len(), fields.join(" ")));
    }
    let bounds = [MINUTES, HOURS, DAYS_OF_MONTH, MONTHS, DAYS_OF_WEEK];
    fields.iter().zip(bounds.iter()).find_map(|(field, bounds)| {
        field.split(',').filter(|e| !e.is_empty()).find_map(|expr| range_error(expr, bounds))
    })
}

fn descriptor_error(spec: &str) -> Option<String> {
    const NAMED: &[&str] = &["@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"];
    if NAMED.contains(&spec) {
        return None;
    }
    match spec.strip_prefix("@every ") {
        Some(d) => duration_error(d).map(|e| format!("failed to parse duration {spec}: {e}")),
        None => Some(format!("unrecognized descriptor: {spec}")),
    }
}

/// One comma-separated part of a field: `*`, `?`, a number or name, or a range, each with a step.
fn range_error(expr: &str, b: &Bounds) -> Option<String> {
    let mut range_and_step = expr.split('/');
    let range = range_and_step.next().unwrap_or_default();
    let step = range_and_step.next();
    let low_and_high: Vec<&str> = range.split('-').collect();
    let (start, mut end) = if low_and_high[0] == "*" || low_and_high[0] == "?" {
        (b.min, b.max)
    } else {
        let start = match number_or_name(low_and_high[0], b) {
            Ok(n) => n,
            Err(e) => return Some(e),
        };
        match low_and_high.len() {
            1 => (start, start),
            2 => match number_or_name(low_and_high[1], b) {
                Ok(end) => (start, end),
                Err(e) => return Some(e),
            },
            _ => return Some(format!("too many hyphens: {expr}")),
        }
    };
    let step = match (step, range_and_step.next()) {
        (None, _) => 1,
        (Some(step), None) => {
            // `N/step` means from N to the field's end.
            if low_and_high.len() == 1 {
                end = b.max;
            }
            match number(step) {
                Ok(n) => n,
                Err(e) => return Some(e),
            }
        }
        (Some(_), Some(_)) => return Some(format!("too many slashes: {expr}")),
    };
    if start < b.min {
        return Some(format!("beginning of range ({start}) below minimum ({}): {expr}", b.min));
    }
    if end > b.max {
        return Some(format!("end of range ({end}) above maximum ({}): {expr}", b.max));
    }
    if start > end {
        return Some(format!("beginning of range ({start}) beyond end of range ({end}): {expr}"));
    }
    (step == 0).then(|| format!("step of range should be a positive number: {expr}"))
}

fn number_or_name(expr: &str, b: &Bounds) -> Result<u64, String> {
    let lower = expr.to_ascii_lowercase();
    match b.names.iter().find(|(name, _)| *name == lower) {
        Some((_, n)) => Ok(*n),
        None => number(expr),
    }
}

/// A number as Go's `strconv.Atoi` reads it (a sign allowed, 64 bits), negative ones refused.
fn number(expr: &str) -> Result<u64, String> {
    let digits = expr.strip_prefix(['+', '-']).unwrap_or(expr);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("failed to parse int from {expr}: strconv.Atoi: parsing {expr:?}: invalid syntax"));
    }
    let Ok(n) = expr.parse::<i64>() else {
        return Err(format!("failed to parse int from {expr}: strconv.Atoi: parsing {expr:?}: value out of range"));
    };
    u64::try_from(n).map_err(|_| format!("negative number ({n}) not allowed: {expr}"))
}

/// Why `s` is no duration as Go's `time.ParseDuration` reads it (`1h30m`, `1.5s`, `-2m`), in its words.
fn duration_error(orig: &str) -> Option<String> {
    const UNITS: &[(&str, f64)] =
        &[("ns", 1.0), ("us", 1e3), ("µs", 1e3), ("μs", 1e3), ("ms", 1e6), ("s", 1e9), ("m", 60e9), ("h", 3600e9)];
    let invalid = || Some(format!("time: invalid duration {orig:?}"));
    let s = orig.strip_prefix(['+', '-']).unwrap_or(orig);
    if s == "0" {
        return None;
    }
    if s.is_empty() {
        return invalid();
    }
    let mut rest = s;
    let mut total = 0f64;
    while !rest.is_empty() {
        // Digits, then a fraction's point and digits, either part possibly empty but not both.
        let digits = |s: &str| s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let whole = digits(rest);
        let mut numeric = whole;
        let mut fraction = 0;
        if rest[whole..].starts_with('.') {
            fraction = digits(&rest[whole + 1..]);
            numeric = whole + 1 + fraction;
        }
        if !rest.starts_with(|c: char| c.is_ascii_digit() || c == '.') || whole + fraction == 0 {
            return invalid();
        }
        let (number, after) = rest.split_at(numeric);
        let unit_len = after.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(after.len());
        if unit_len == 0 {
            return Some(format!("time: missing unit in duration {orig:?}"));
        }
        let (unit, next) = after.split_at(unit_len);
        let Some((_, scale)) = UNITS.iter().find(|(u, _)| *u == unit) else {
            return Some(format!("time: unknown unit {unit:?} in duration {orig:?}"));
        };
        total += format!("0{number}").parse::<f64>().unwrap_or(f64::INFINITY) * scale;
        if total > i64::MAX as f64 {
            return invalid();
        }
        rest = next;
    }
    None
}

/// Why `name` is no time zone Go's `time.LoadLocation` knows, in its words. `UTC` and `Local` are
/// Go's own names; every other is looked up in the IANA database kgate carries.
pub(super) fn location_error(name: &str) -> Option<String> {
    if name.is_empty() || name == "UTC" || name == "Local" || chrono_tz::Tz::from_str(name).is_ok() {
        return None;
    }
    Some(format!("unknown time zone {name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_kube_takes() {
        for ok in [
            "*/5 * * * *",
            "0 0 1 1 *",
            "0 9-17 * * MON-FRI",
            "30 2 ? jan,Jul sun",
            "5/15 * * * *",
            "@hourly",
            "@every 1h30m",
            "@every 1.5s",
            "0,,5 * * * *",
            "TZ=UTC 0 * * * *",
        ] {
            assert_eq!(schedule_error(ok), None, "{ok}");
        }
    }

    #[test]
    fn schedules_refused_in_robfigs_words() {
        for (bad, why) in [
            ("", "empty spec string"),
            ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
            ("0 0 * * * *", "expected exactly 5 fields, found 6: [0 0 * * * *]"),
            ("60 * * * *", "end of range (60) above maximum (59): 60"),
            ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
            ("* * * * 7", "end of range (7) above maximum (6): 7"),
            ("5-2 * * * *", "beginning of range (5) beyond end of range (2): 5-2"),
            ("*/0 * * * *", "step of range should be a positive number: */0"),
            ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
            ("*/2/3 * * * *", "too many slashes: */2/3"),
            ("x * * * *", "failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax"),
            ("* * * foo *", "failed to parse int from foo: strconv.Atoi: parsing \"foo\": invalid syntax"),
            ("@often", "unrecognized descriptor: @often"),
            ("@every 5", "failed to parse duration @every 5: time: missing unit in duration \"5\""),
            ("@every 5y", "failed to parse duration @every 5y: time: unknown unit \"y\" in duration \"5y\""),
            ("@every .", "failed to parse duration @every .: time: invalid duration \".\""),
            ("@every 1.2.3s", "failed to parse duration @every 1.2.3s: time: missing unit in duration \"1.2.3s\""),
            ("TZ=Mars/Base 0 * * * *", "provided bad location Mars/Base: unknown time zone Mars/Base"),
        ] {
            assert_eq!(schedule_error(bad).as_deref(), Some(why), "{bad}");
        }
    }

    #[test]
    fn time_zones_from_the_iana_database() {
        for ok in ["America/New_York", "Europe/Paris", "Etc/GMT+5", "UTC", "US/Eastern"] {
            assert_eq!(location_error(ok), None, "{ok}");
        }
        assert_eq!(location_error("Mars/Base").as_deref(), Some("unknown time zone Mars/Base"));
        assert_eq!(location_error("america/new_york").as_deref(), Some("unknown time zone america/new_york"));
    }
}
