//! Go-compatible text forms of times and durations, as apimachinery writes them in JSON.

use super::ProtoError;

/// Splits Unix seconds into (year, month, day, hour, minute, second) in UTC.
fn civil(secs: i64) -> (i64, u32, u32, u32, u32, u32) {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Days-to-civil over 400-year eras (proleptic Gregorian calendar).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    // All components are bounded by the arithmetic above, so the narrowing casts are exact.
    (year, month as u32, day as u32, (rem / 3600) as u32, (rem % 3600 / 60) as u32, (rem % 60) as u32)
}

fn date_time(secs: i64) -> Result<String, ProtoError> {
    // Go's Time.MarshalJSON refuses years it cannot print in four digits.
    let (y, mo, d, h, mi, s) = civil(secs);
    if !(0..=9999).contains(&y) {
        return Err(ProtoError::Malformed(format!("time year {y} outside of range [0,9999]")));
    }
    Ok(format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}"))
}

/// `metav1.Time`: whole seconds, UTC (apimachinery drops the nanoseconds on decode).
pub(super) fn time(seconds: i64) -> Result<String, ProtoError> {
    Ok(format!("{}Z", date_time(seconds)?))
}

/// `metav1.MicroTime`: UTC with exactly six fractional digits.
pub(super) fn micro_time(seconds: i64, nanos: i64) -> Result<String, ProtoError> {
    let total = seconds
        .checked_add(nanos.div_euclid(1_000_000_000))
        .ok_or_else(|| ProtoError::Malformed("time out of range".into()))?;
    let micros = nanos.rem_euclid(1_000_000_000) / 1000;
    Ok(format!("{}.{micros:06}Z", date_time(total)?))
}

/// Go's `time.Duration.String()`, e.g. `1h2m3.5s`, `150ms`, `0s`.
pub(super) fn duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let u = nanos.unsigned_abs();
    if u < 1_000_000_000 {
        // Sub-second values use the largest unit that keeps an integer part.
        let (unit, scale) = if u < 1000 {
            ("ns", 1)
        } else if u < 1_000_000 {
            ("µs", 1000)
        } else {
            ("ms", 1_000_000)
        };
        return format!("{sign}{}{unit}", fraction(u, scale));
    }
    let secs = u / 1_000_000_000;
    let frac = u % 1_000_000_000;
    let (h, m, s) = (secs / 3600, secs % 3600 / 60, secs % 60);
    let sec_part = fraction(s * 1_000_000_000 + frac, 1_000_000_000);
    if h > 0 {
        format!("{sign}{h}h{m}m{sec_part}s")
    } else if m > 0 {
        format!("{sign}{m}m{sec_part}s")
    } else {
        format!("{sign}{sec_part}s")
    }
}

/// `value / scale` with the fraction's trailing zeros removed, as Go prints it.
fn fraction(value: u64, scale: u64) -> String {
    let int = value / scale;
    let frac = value % scale;
    if frac == 0 {
        return int.to_string();
    }
    let width = scale.to_string().len() - 1;
    let digits = format!("{frac:0width$}");
    format!("{int}.{}", digits.trim_end_matches('0'))
}
