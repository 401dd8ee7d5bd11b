//! The period of scheduled snapshots (`--snapshot-every`): `30m`, `1h`, `1h30m`, `2d`.
//! Hand-written because it is this small; no crate in the build parses durations.

use std::time::Duration;

/// Parses a duration: whole numbers with units `d`, `h`, `m`, `s`, `ms`, one after
/// another (`1h30m`, `90s`, `2d`); at least one second.
pub fn parse(text: &str) -> Result<Duration, String> {
    let bad = || format!("'{text}' is not a duration: write e.g. 30m, 1h, 1h30m, 90s, 2d");
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        let number: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ms" => Duration::from_millis(1),
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            "d" => Duration::from_secs(86_400),
            _ => return Err(bad()),
        };
        let part = u32::try_from(number)
            .ok()
            .and_then(|n| unit.checked_mul(n))
            .ok_or_else(bad)?;
        total = total.checked_add(part).ok_or_else(bad)?;
        rest = &rest[unit_len..];
    }
    if total < Duration::from_secs(1) {
        return Err(format!("'{text}' is too short: at least 1s"));
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units_one_after_another() {
        let secs = |t: &str| parse(t).map(|d| d.as_secs());
        assert_eq!(secs("90s"), Ok(90));
        assert_eq!(secs("30m"), Ok(1800));
        assert_eq!(secs("1h30m"), Ok(5400));
        assert_eq!(secs("2d"), Ok(172_800));
        assert_eq!(parse("1500ms").unwrap().as_millis(), 1500);
        for bad in [
            "",
            "10",
            "h",
            "1x",
            "1h 30m",
            "-1h",
            "500ms",
            "99999999999h",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
