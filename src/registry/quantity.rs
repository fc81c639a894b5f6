//! kube's `resource.Quantity` read as a number, for the checks that compare quantities: a quota's
//! counts, a container's requests against its limits, a claim's size against its last.

use serde_json::Value;

/// The value of a quantity (`"1500m"`, `"2Gi"`, `"1e3"`, or a JSON number), `None` when it is not one.
/// As an `f64`: exact for the sizes and counts kube holds up to 2^53, and a comparison of larger ones
/// is off by less than one part in 10^15.
pub(super) fn value(q: &Value) -> Option<f64> {
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
    let factor: f64 = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        // A decimal exponent (`1e3`, `2E2`), which kube's quantities take too.
        e if e.len() > 1 && e.starts_with(['e', 'E']) => 10f64.powi(e[1..].parse::<i32>().ok()?.clamp(-30, 30)),
        _ => return None,
    };
    let v = num.parse::<f64>().ok()? * factor;
    v.is_finite().then_some(v)
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
}
