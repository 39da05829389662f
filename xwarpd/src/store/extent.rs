//! The store program's range rules, shared by every transport that serves it: what a READ
//! returns and whether a WRITE fits.

use rpcrdma::storage::{ReadArgs, StoreStatus};

/// A READ of `a` on a store of `size` octets: the octets returned and whether they reach the
/// end. Past the end: OUT_OF_RANGE; more than `max_io`: TOO_BIG.
pub(crate) fn read_extent(size: u64, max_io: u32, a: ReadArgs) -> Result<(u32, bool), StoreStatus> {
    if a.offset > size {
        return Err(StoreStatus::OutOfRange);
    }
    if a.count > max_io {
        return Err(StoreStatus::TooBig);
    }
    let n = (size - a.offset).min(u64::from(a.count)) as u32;
    Ok((n, a.offset + u64::from(n) >= size))
}

/// A WRITE of `len` octets at `offset`: past the end, OUT_OF_RANGE; more than `max_io`, TOO_BIG.
pub(crate) fn write_extent(
    size: u64,
    max_io: u32,
    offset: u64,
    len: u32,
) -> Result<(), StoreStatus> {
    if offset
        .checked_add(u64::from(len))
        .is_none_or(|end| end > size)
    {
        return Err(StoreStatus::OutOfRange);
    }
    if len > max_io {
        return Err(StoreStatus::TooBig);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_stop_at_the_end_and_writes_must_fit() {
        let r = |offset, count| read_extent(100, 50, ReadArgs { offset, count });
        assert_eq!(r(0, 10), Ok((10, false)));
        assert_eq!(r(90, 50), Ok((10, true)));
        assert_eq!(r(100, 1), Ok((0, true)));
        assert_eq!(r(101, 1), Err(StoreStatus::OutOfRange));
        assert_eq!(r(0, 51), Err(StoreStatus::TooBig));
        assert_eq!(write_extent(100, 50, 60, 40), Ok(()));
        assert_eq!(write_extent(100, 50, 61, 40), Err(StoreStatus::OutOfRange));
        assert_eq!(
            write_extent(100, 50, u64::MAX, 1),
            Err(StoreStatus::OutOfRange)
        );
        assert_eq!(write_extent(1000, 50, 0, 51), Err(StoreStatus::TooBig));
    }
}
