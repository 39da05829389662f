//! ONC RPC record marking over a byte stream (RFC 5531 §11): a record is one or more fragments,
//! each behind a 4-octet mark whose top bit says "last fragment" and whose low 31 bits give the
//! fragment's length.
//!
//! The reader reassembles a record up to a bound ([`RecordReader::read_record`]: at most
//! `max_record` octets and [`MAX_FRAGMENTS`] fragments, so a peer can neither grow memory nor
//! spin on empty fragments) or hands out its octets piece by piece without buffering
//! ([`RecordReader::read_exact`], [`RecordReader::next_run`]) so that bulk data can go straight
//! into its destination. The writer sends every record as one fragment.

use std::io;

use super::stream::RpcStream;

/// The last-fragment bit of a record mark.
pub const LAST_FRAGMENT: u32 = 0x8000_0000;
/// Most fragments one record may have.
pub const MAX_FRAGMENTS: u32 = 1024;

/// The 4-octet mark of a record sent as one fragment of `len` octets.
pub fn single_fragment_mark(len: u32) -> [u8; 4] {
    debug_assert!(len < LAST_FRAGMENT);
    (LAST_FRAGMENT | len).to_be_bytes()
}

/// Why a record could not be read.
#[derive(Debug)]
pub enum RecordError {
    /// The stream ended between records (a clean close).
    Closed,
    /// The stream ended inside a record.
    Truncated,
    /// The record is longer than allowed, or has more than [`MAX_FRAGMENTS`] fragments.
    TooLong,
    /// Reading the stream failed (including a read timeout the caller turned into an error).
    Io(io::Error),
}

impl From<io::Error> for RecordError {
    fn from(e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            RecordError::Truncated
        } else {
            RecordError::Io(e)
        }
    }
}

/// Reads records from a stream, one at a time.
#[derive(Debug, Default)]
pub struct RecordReader {
    /// Octets left in the current fragment.
    left: u32,
    /// The current fragment is the record's last.
    last: bool,
    /// Fragments of the current record so far (0: between records).
    fragments: u32,
    /// Octets of the current record so far.
    taken: u64,
}

impl RecordReader {
    /// True between records (nothing of the next record read yet).
    pub fn at_boundary(&self) -> bool {
        self.fragments == 0
    }

    /// Reads the next fragment mark; `Ok(false)` when the stream ended before any octet of it
    /// and `at_start` (between records).
    fn next_fragment(
        &mut self,
        s: &mut dyn RpcStream,
        at_start: bool,
    ) -> Result<bool, RecordError> {
        let mut mark = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            let n = s.read(&mut mark[got..])?;
            if n == 0 {
                return if got == 0 && at_start {
                    Ok(false)
                } else {
                    Err(RecordError::Truncated)
                };
            }
            got += n;
        }
        let m = u32::from_be_bytes(mark);
        self.fragments += 1;
        if self.fragments > MAX_FRAGMENTS {
            return Err(RecordError::TooLong);
        }
        self.left = m & !LAST_FRAGMENT;
        self.last = m & LAST_FRAGMENT != 0;
        Ok(true)
    }

    /// Starts the next record: reads fragment marks until one has octets or is the last.
    /// `Err(Closed)` when the stream ends cleanly between records.
    pub fn begin(&mut self, s: &mut dyn RpcStream) -> Result<(), RecordError> {
        debug_assert!(self.at_boundary());
        self.taken = 0;
        if !self.next_fragment(s, true)? {
            return Err(RecordError::Closed);
        }
        self.skip_empty(s)
    }

    fn skip_empty(&mut self, s: &mut dyn RpcStream) -> Result<(), RecordError> {
        while self.left == 0 && !self.last {
            self.next_fragment(s, false)?;
        }
        Ok(())
    }

    /// Octets of the record left in its current fragment (more fragments may follow).
    pub fn fragment_left(&self) -> u32 {
        self.left
    }

    /// True when the record has no octet left (its last fragment is consumed).
    pub fn record_done(&self) -> bool {
        self.left == 0 && self.last
    }

    /// Ends the record (all of it consumed): the reader is between records again.
    fn end(&mut self) {
        self.fragments = 0;
        self.left = 0;
        self.last = false;
    }

    /// Makes the next `want` octets available in the current fragment: returns how many of
    /// them (at least 1) lie in it before the fragment ends. `Err(Truncated)` when the record
    /// ends first.
    pub fn next_run(&mut self, s: &mut dyn RpcStream, want: u32) -> Result<u32, RecordError> {
        if self.at_boundary() {
            return Err(RecordError::Truncated);
        }
        self.skip_empty(s)?;
        if self.left == 0 {
            return Err(RecordError::Truncated);
        }
        Ok(want.min(self.left))
    }

    /// Notes that the caller consumed `n` octets of the current fragment itself (through the
    /// stream's transfer read), as [`Self::next_run`] allowed.
    pub fn consumed(&mut self, n: u32) {
        debug_assert!(n <= self.left);
        self.left -= n;
        self.taken += u64::from(n);
        if self.record_done() {
            self.end();
        }
    }

    /// Reads exactly `buf.len()` octets of the current record (across fragments).
    pub fn read_exact(&mut self, s: &mut dyn RpcStream, buf: &mut [u8]) -> Result<(), RecordError> {
        let mut at = 0;
        while at < buf.len() {
            let run = self.next_run(s, (buf.len() - at).min(u32::MAX as usize) as u32)? as usize;
            let n = s.read(&mut buf[at..at + run])?;
            if n == 0 {
                return Err(RecordError::Truncated);
            }
            self.consumed(n as u32);
            at += n;
        }
        Ok(())
    }

    /// Skips the rest of the current record.
    pub fn skip_rest(&mut self, s: &mut dyn RpcStream) -> Result<(), RecordError> {
        let mut scratch = [0u8; 4096];
        while !self.at_boundary() {
            let n = self.next_run(s, scratch.len() as u32)? as usize;
            self.read_exact(s, &mut scratch[..n])?;
        }
        Ok(())
    }

    /// Reads a whole record into `out` (cleared first), refusing one longer than `max_record`
    /// octets before reading its octets. `Err(Closed)` at a clean end of the stream.
    pub fn read_record(
        &mut self,
        s: &mut dyn RpcStream,
        out: &mut Vec<u8>,
        max_record: u32,
    ) -> Result<(), RecordError> {
        out.clear();
        self.begin(s)?;
        loop {
            if self.taken + u64::from(self.left) > u64::from(max_record) {
                return Err(RecordError::TooLong);
            }
            let at = out.len();
            out.resize(at + self.left as usize, 0);
            let n = self.left;
            if n > 0 {
                let mut got = 0usize;
                while got < n as usize {
                    let k = s.read(&mut out[at + got..at + n as usize])?;
                    if k == 0 {
                        return Err(RecordError::Truncated);
                    }
                    got += k;
                }
            }
            self.left = 0;
            self.taken += u64::from(n);
            if self.last {
                self.end();
                return Ok(());
            }
            self.next_fragment(s, false)?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oncrpc::stream::tests::MemStream;

    fn frag(last: bool, body: &[u8]) -> Vec<u8> {
        let m = if last { LAST_FRAGMENT } else { 0 } | body.len() as u32;
        let mut v = m.to_be_bytes().to_vec();
        v.extend_from_slice(body);
        v
    }

    /// RFC 5531 §11: fragments (empty ones too) reassemble into one record; the next record
    /// follows; the end of the stream between records is a clean close.
    #[test]
    fn fragments_reassemble_and_records_follow_each_other() {
        let mut wire = frag(false, b"ab");
        wire.extend(frag(false, b""));
        wire.extend(frag(true, b"cde"));
        wire.extend(frag(true, b"xyz"));
        let mut s = MemStream::new(wire, 1);
        let mut r = RecordReader::default();
        let mut out = Vec::new();
        r.read_record(&mut s, &mut out, 100).unwrap();
        assert_eq!(out, b"abcde");
        assert!(r.at_boundary());
        r.read_record(&mut s, &mut out, 100).unwrap();
        assert_eq!(out, b"xyz");
        assert!(matches!(
            r.read_record(&mut s, &mut out, 100),
            Err(RecordError::Closed)
        ));
    }

    /// The bound is checked from the marks, before the octets are read or buffered.
    #[test]
    fn a_record_over_the_bound_is_refused_before_its_octets_are_read() {
        let mut wire = frag(false, &[1; 60]);
        wire.extend(frag(true, &[2; 60]));
        let mut s = MemStream::new(wire, 1000);
        let mut out = Vec::new();
        let r = RecordReader::default().read_record(&mut s, &mut out, 100);
        assert!(matches!(r, Err(RecordError::TooLong)));
        assert!(out.len() <= 60, "the second fragment was never buffered");
        // A huge announced length alone is refused at once.
        let mut s = MemStream::new((LAST_FRAGMENT | 0x7fff_ffff).to_be_bytes().to_vec(), 1000);
        let r = RecordReader::default().read_record(&mut s, &mut out, 1 << 20);
        assert!(matches!(r, Err(RecordError::TooLong)));
    }

    /// Endless empty fragments end at MAX_FRAGMENTS, not in a spin.
    #[test]
    fn empty_fragments_are_bounded() {
        let wire: Vec<u8> = (0..MAX_FRAGMENTS + 1)
            .flat_map(|_| frag(false, b""))
            .collect();
        let mut s = MemStream::new(wire, 4096);
        let mut out = Vec::new();
        let r = RecordReader::default().read_record(&mut s, &mut out, 100);
        assert!(matches!(r, Err(RecordError::TooLong)));
    }

    /// A stream that ends inside a mark or a fragment is truncated, not closed.
    #[test]
    fn truncation_inside_a_record_is_an_error() {
        for cut in [2usize, 4, 6] {
            let wire = frag(true, b"abcd")[..cut].to_vec();
            let mut s = MemStream::new(wire, 1);
            let mut out = Vec::new();
            let r = RecordReader::default().read_record(&mut s, &mut out, 100);
            assert!(matches!(r, Err(RecordError::Truncated)), "cut at {cut}");
        }
    }

    /// Piecewise reads cross fragment boundaries and skip_rest finds the next record.
    #[test]
    fn piecewise_reads_cross_fragments() {
        let mut wire = frag(false, b"abc");
        wire.extend(frag(true, b"defgh"));
        wire.extend(frag(true, b"next"));
        let mut s = MemStream::new(wire, 2);
        let mut r = RecordReader::default();
        r.begin(&mut s).unwrap();
        let mut four = [0u8; 4];
        r.read_exact(&mut s, &mut four).unwrap();
        assert_eq!(&four, b"abcd");
        assert_eq!(r.next_run(&mut s, 100).unwrap(), 4);
        r.skip_rest(&mut s).unwrap();
        assert!(r.at_boundary());
        let mut out = Vec::new();
        r.read_record(&mut s, &mut out, 100).unwrap();
        assert_eq!(out, b"next");
    }
}
