//! Byte sizes as people write them: digits with an optional unit, powers of 1024.

use std::fmt;
use std::str::FromStr;

/// A byte count written as a number with an optional unit: `4096`, `4K`, `4KiB`, `4 MiB`, `1G`,
/// `1_000`. K, M, G, T, P, E mean powers of 1024 with or without `i` and `B` (`4K` = `4KB` =
/// `4KiB` = 4096), case-insensitive; fractions round to the nearest byte (`1.5K` = 1536). The
/// parser is the `parse-size` crate's, in binary mode. Limits (a maximum message size, a
/// range) are the caller's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ByteSize(pub u64);

/// Why a text is not a [`ByteSize`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeError {
    /// No number given.
    Empty,
    /// Not a number with a known unit.
    NotASize,
    /// 16 EiB or more.
    TooLarge,
}

impl SizeError {
    /// What is accepted, for messages that name the setting themselves.
    pub fn expected(self) -> &'static str {
        match self {
            SizeError::Empty | SizeError::NotASize => {
                "a number of bytes with an optional unit (powers of 1024): 4096, 4K, 64KiB, 4 MiB, 1G"
            }
            SizeError::TooLarge => "a size below 16 EiB",
        }
    }
}

impl fmt::Display for SizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expected())
    }
}

impl std::error::Error for SizeError {}

impl FromStr for ByteSize {
    type Err = SizeError;
    fn from_str(s: &str) -> Result<Self, SizeError> {
        const BINARY: parse_size::Config = parse_size::Config::new().with_binary();
        match BINARY.parse_size(s.trim()) {
            Ok(n) => Ok(ByteSize(n)),
            Err(parse_size::Error::Empty) => Err(SizeError::Empty),
            Err(parse_size::Error::PosOverflow) => Err(SizeError::TooLarge),
            Err(_) => Err(SizeError::NotASize),
        }
    }
}

impl fmt::Display for ByteSize {
    /// The plain number of bytes (what [`FromStr`] reads back).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl From<ByteSize> for u64 {
    fn from(s: ByteSize) -> u64 {
        s.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<u64, SizeError> {
        s.parse::<ByteSize>().map(u64::from)
    }

    #[test]
    fn every_documented_form_in_powers_of_1024() {
        assert_eq!(parse("4096"), Ok(4096));
        assert_eq!(parse("4K"), Ok(4096));
        assert_eq!(parse("4k"), Ok(4096));
        assert_eq!(parse("4KB"), Ok(4096));
        assert_eq!(parse("4KiB"), Ok(4096));
        assert_eq!(parse("4 MiB"), Ok(4 << 20));
        assert_eq!(parse("16M"), Ok(16 << 20));
        assert_eq!(parse("1G"), Ok(1 << 30));
        assert_eq!(parse("1gib"), Ok(1 << 30));
        assert_eq!(parse("2T"), Ok(2 << 40));
        assert_eq!(parse("7"), Ok(7));
        assert_eq!(parse("7B"), Ok(7));
        assert_eq!(parse("1_000"), Ok(1000));
        assert_eq!(parse(" 64KiB "), Ok(65536));
        assert_eq!(parse("1.5K"), Ok(1536));
        assert_eq!(parse("0"), Ok(0));
    }

    #[test]
    fn errors_say_what_is_wrong() {
        assert_eq!(parse(""), Err(SizeError::Empty));
        assert_eq!(parse("   "), Err(SizeError::Empty));
        assert_eq!(parse("x"), Err(SizeError::NotASize));
        assert_eq!(parse("-1"), Err(SizeError::NotASize));
        assert_eq!(parse("4Q"), Err(SizeError::NotASize));
        assert_eq!(parse("4 KiB extra"), Err(SizeError::NotASize));
        assert_eq!(parse("99999999999T"), Err(SizeError::TooLarge));
        assert_eq!(parse("99999999999999999999"), Err(SizeError::TooLarge));
        assert!(SizeError::NotASize.to_string().contains("4KiB"));
        assert!(SizeError::TooLarge.to_string().contains("16 EiB"));
    }

    #[test]
    fn display_reads_back() {
        let s = ByteSize(3 << 20);
        assert_eq!(s.to_string().parse::<ByteSize>(), Ok(s));
    }
}
