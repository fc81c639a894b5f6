//! kube's `resource.Quantity` read as a number, for the checks that compare quantities: a quota's
//! counts, a container's requests against its limits, a claim's size against its last.

use serde_json::Value;

/// The value of a quantity (`"1500m"`, `"2Gi"`, `"1e3"`, or a JSON number), `None` when it is not one.
/// As an `f64`: exact for the sizes and counts kube holds up to 2^53; [`compare`] compares exactly.
pub(super) fn value(q: &Value) -> Option<f64> {
    let x = exact(q)?;
    let v = x.m as f64 * 10f64.powi(x.e);
    v.is_finite().then_some(v)
}

/// A quantity exactly, `m × 10^e`, for comparisons that must not round: kube compares requests and
/// limits as decimals, and `700m` is `0.7` there, where in floating point it is not.
#[derive(Debug, Clone, Copy)]
struct Exact {
    m: i128,
    e: i32,
}

fn exact(q: &Value) -> Option<Exact> {
    let text;
    let s = match q {
        Value::String(s) => s.trim(),
        Value::Number(n) => {
            text = n.to_string();
            &text
        }
        _ => return None,
    };
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-')).unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    let (negative, num) = match num.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, num.strip_prefix('+').unwrap_or(num)),
    };
    let (whole, fraction) = num.split_once('.').unwrap_or((num, ""));
    let digits = format!("{whole}{fraction}");
    // Beyond 36 digits an i128 may not hold it: no quantity kube takes is that long.
    if digits.is_empty() || digits.len() > 36 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut m: i128 = digits.parse().ok()?;
    let mut e = -i32::try_from(fraction.len()).ok()?;
    let binary = |k: u32| 1024i128.pow(k);
    match suffix {
        "" => {}
        "n" => e -= 9,
        "u" => e -= 6,
        "m" => e -= 3,
        "k" => e += 3,
        "M" => e += 6,
        "G" => e += 9,
        "T" => e += 12,
        "P" => e += 15,
        "E" => e += 18,
        "Ki" => m = m.checked_mul(binary(1))?,
        "Mi" => m = m.checked_mul(binary(2))?,
        "Gi" => m = m.checked_mul(binary(3))?,
        "Ti" => m = m.checked_mul(binary(4))?,
        "Pi" => m = m.checked_mul(binary(5))?,
        "Ei" => m = m.checked_mul(binary(6))?,
        x if x.len() > 1 && x.starts_with(['e', 'E']) => e += x[1..].parse::<i32>().ok()?.clamp(-100, 100),
        _ => return None,
    }
    Some(Exact { m: if negative { -m } else { m }, e })
}

/// A sum of quantities, exact while it fits (kube adds `resource.Quantity`s exactly), else as `f64`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Total {
    exact: Option<Exact>,
    approx: f64,
}

impl Total {
    /// The quantity `q` as a total; `None` when it is no quantity.
    pub(super) fn of(q: &Value) -> Option<Total> {
        Some(Total { exact: exact(q), approx: value(q)? })
    }

    /// This total and `other`.
    pub(super) fn plus(self, other: Total) -> Total {
        let exact = match (self.exact, other.exact) {
            (Some(x), Some(y)) => {
                let e = x.e.min(y.e);
                aligned(x, e).zip(aligned(y, e)).and_then(|(a, b)| a.checked_add(b)).map(|m| Exact { m, e })
            }
            _ => None,
        };
        Total { exact, approx: self.approx + other.approx }
    }

    /// Whether this total equals `other`: exactly where both are exact, else as `f64`s.
    pub(super) fn same(self, other: Total) -> bool {
        if let (Some(x), Some(y)) = (self.exact, other.exact) {
            let e = x.e.min(y.e);
            if let (Some(a), Some(b)) = (aligned(x, e), aligned(y, e)) {
                return a == b;
            }
        }
        self.approx == other.approx
    }
}

/// The mantissa of `q` at exponent `e` (at most `q.e`); `None` past an `i128`.
fn aligned(q: Exact, e: i32) -> Option<i128> {
    q.m.checked_mul(10i128.checked_pow(u32::try_from(q.e - e).ok()?)?)
}

/// How quantity `a` compares with `b`: exactly where both fit an exact form, else as `value`s;
/// `None` when either is no quantity.
pub(super) fn compare(a: &Value, b: &Value) -> Option<std::cmp::Ordering> {
    if let (Some(x), Some(y)) = (exact(a), exact(b)) {
        let e = x.e.min(y.e);
        if let (Some(x), Some(y)) = (aligned(x, e), aligned(y, e)) {
            return Some(x.cmp(&y));
        }
    }
    value(a)?.partial_cmp(&value(b)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn suffixes_and_exponents() {
        assert_eq!(value(&json!("1500m")), Some(1.5));
        assert_eq!(value(&json!("2Gi")), Some(2.0 * 1024.0 * 1024.0 * 1024.0));
        assert_eq!(value(&json!("1e3")), Some(1000.0));
        assert_eq!(value(&json!(-3)), Some(-3.0));
        assert_eq!(value(&json!("10Qi")), None);
        assert_eq!(value(&json!("ten")), None);
    }

    #[test]
    fn compared_exactly() {
        use std::cmp::Ordering::*;
        let cmp = |a: Value, b: Value| compare(&a, &b);
        assert_eq!(cmp(json!("700m"), json!("0.7")), Some(Equal), "equal as decimals, not as doubles");
        assert_eq!(cmp(json!("1Gi"), json!("1073741824")), Some(Equal));
        assert_eq!(cmp(json!("1G"), json!("1Gi")), Some(Less));
        assert_eq!(cmp(json!("2"), json!(1.5)), Some(Greater));
        assert_eq!(cmp(json!("-1"), json!("0")), Some(Less));
        assert_eq!(cmp(json!("1e3"), json!("1k")), Some(Equal));
        assert_eq!(cmp(json!("x"), json!("1")), None);
    }

    #[test]
    fn totals_add_exactly() {
        let t = |q: &str| Total::of(&json!(q)).unwrap();
        assert!(t("100m").plus(t("200m")).same(t("0.3")), "0.1 + 0.2 is 0.3 as decimals");
        assert!(t("1Gi").plus(t("1Gi")).same(t("2Gi")));
        assert!(!t("1G").plus(t("1G")).same(t("2Gi")));
        assert!(t("1e100").plus(t("1n")).same(t("1e100")), "past an i128, as f64");
        assert!(Total::of(&json!("ten")).is_none());
    }
}
