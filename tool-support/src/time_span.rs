//! Durations as people write them: a number of seconds, or a number with a unit.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use fundu::{CustomDurationParser, CustomTimeUnit, TimeUnit};

/// A duration written as a number with an optional unit: `10` (seconds), `1.5s`, `250ms`, `5m`
/// (`5min`), `1h`. The number may have a fraction (`0.5h`); without a unit it counts seconds.
/// No sign, exponent, infinity, space before the unit or unit other than ms, s, m, min and h.
/// The parser is the `fundu` crate's, set to this grammar; no float rounding (`0.001` is one
/// millisecond). Limits (a shortest and a longest) are the caller's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TimeSpan(pub Duration);

/// Why a text is not a [`TimeSpan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanError {
    /// No number given.
    Empty,
    /// Not a number with a known unit.
    NotADuration,
    /// More than `u64::MAX` seconds.
    TooLarge,
}

impl SpanError {
    /// What is accepted, for messages that name the setting themselves.
    pub fn expected(self) -> &'static str {
        match self {
            SpanError::Empty | SpanError::NotADuration => {
                "seconds, or a number with a unit ms, s, m or h: 10, 1.5s, 250ms, 5m, 1h"
            }
            SpanError::TooLarge => "a duration below 2^64 seconds",
        }
    }
}

impl fmt::Display for SpanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expected())
    }
}

impl std::error::Error for SpanError {}

/// The units of the grammar and their names.
const UNITS: [CustomTimeUnit<'static>; 4] = [
    CustomTimeUnit::with_default(TimeUnit::MilliSecond, &["ms"]),
    CustomTimeUnit::with_default(TimeUnit::Second, &["s"]),
    CustomTimeUnit::with_default(TimeUnit::Minute, &["m", "min"]),
    CustomTimeUnit::with_default(TimeUnit::Hour, &["h"]),
];

impl FromStr for TimeSpan {
    type Err = SpanError;
    fn from_str(s: &str) -> Result<Self, SpanError> {
        let parser = CustomDurationParser::builder()
            .time_units(&UNITS)
            .default_unit(TimeUnit::Second)
            .disable_exponent()
            .disable_infinity()
            .build();
        let s = s.trim();
        // fundu reads a lone sign or point as zero; a duration needs a digit.
        if !s
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_digit() || b == b'.')
            || !s.bytes().any(|b| b.is_ascii_digit())
        {
            return Err(if s.is_empty() {
                SpanError::Empty
            } else {
                SpanError::NotADuration
            });
        }
        let d = parser.parse(s).map_err(|e| match e {
            fundu::ParseError::Empty => SpanError::Empty,
            fundu::ParseError::Overflow | fundu::ParseError::PositiveExponentOverflow => {
                SpanError::TooLarge
            }
            _ => SpanError::NotADuration,
        })?;
        // fundu saturates what overflows to the largest duration.
        match Duration::try_from(d) {
            Ok(d) if d < Duration::MAX => Ok(TimeSpan(d)),
            _ => Err(SpanError::TooLarge),
        }
    }
}

impl fmt::Display for TimeSpan {
    /// The largest unit that holds it whole (`1h`, `5m`, `300s` is `5m`, `250ms`), else
    /// seconds with their fraction (`1.000000001s`); what [`FromStr`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (secs, nanos) = (self.0.as_secs(), self.0.subsec_nanos());
        if nanos == 0 {
            return match secs {
                0 => f.write_str("0s"),
                s if s % 3600 == 0 => write!(f, "{}h", s / 3600),
                s if s % 60 == 0 => write!(f, "{}m", s / 60),
                s => write!(f, "{s}s"),
            };
        }
        if nanos % 1_000_000 == 0 && secs < u64::MAX / 1000 {
            return write!(f, "{}ms", secs * 1000 + u64::from(nanos / 1_000_000));
        }
        let frac = format!("{nanos:09}");
        write!(f, "{secs}.{}s", frac.trim_end_matches('0'))
    }
}

impl From<TimeSpan> for Duration {
    fn from(s: TimeSpan) -> Duration {
        s.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Duration, SpanError> {
        s.parse::<TimeSpan>().map(Duration::from)
    }

    #[test]
    fn every_documented_form() {
        assert_eq!(parse("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse("5min"), Ok(Duration::from_secs(300)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("0.5h"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse("300s"), Ok(Duration::from_secs(300)));
        assert_eq!(parse(".25s"), Ok(Duration::from_millis(250)));
        assert_eq!(parse(" 2h "), Ok(Duration::from_secs(7200)));
        assert_eq!(parse("0"), Ok(Duration::ZERO));
        // No float rounding: a millisecond stays a millisecond.
        assert_eq!(parse("0.001"), Ok(Duration::from_millis(1)));
        assert_eq!(parse("1.000000001s"), Ok(Duration::new(1, 1)));
    }

    #[test]
    fn nonsense_is_refused_with_what_is_accepted() {
        assert_eq!(parse(""), Err(SpanError::Empty));
        assert_eq!(parse("  "), Err(SpanError::Empty));
        for bad in [
            "forever", "-1", "-1s", "+1s", "5d", "1w", "1e3", "inf", "infinity", "1 s", "s", ".",
            "1.5.5", "5mm", "1us", "1ns", "10sec", "1h30m", "0x10", "1,5s",
        ] {
            assert_eq!(parse(bad), Err(SpanError::NotADuration), "{bad:?}");
        }
        assert_eq!(parse("99999999999999999999"), Err(SpanError::TooLarge));
        assert_eq!(parse("9999999999999999999h"), Err(SpanError::TooLarge));
        let msg = SpanError::NotADuration.to_string();
        for form in ["1.5s", "250ms", "5m", "1h"] {
            assert!(msg.contains(form), "{msg}");
        }
    }

    #[test]
    fn display_reads_back_in_the_largest_whole_unit() {
        for (d, text) in [
            (Duration::from_secs(3600), "1h"),
            (Duration::from_secs(300), "5m"),
            (Duration::from_secs(301), "301s"),
            (Duration::from_millis(1500), "1500ms"),
            (Duration::from_millis(250), "250ms"),
            (Duration::new(2, 5), "2.000000005s"),
            (Duration::ZERO, "0s"),
        ] {
            let s = TimeSpan(d);
            assert_eq!(s.to_string(), text);
            assert_eq!(s.to_string().parse::<TimeSpan>(), Ok(s));
        }
    }
}
