//! The sender's side: which byte ranges of the send stream are transfer bytes (runs, given by
//! the ULP), where ULP messages start, how a segment is cut so that it holds at most one run,
//! and the option each segment carries.
//!
//! Rules implemented (draft §3.1.8, §3.3, §4):
//! * TCPRDMA-13: at most one contiguous run of transfer bytes per segment ([`SendMarks::cut`]);
//!   two runs of the same transfer separated by other bytes are two runs (draft §4).
//! * TCPRDMA-11: every segment holding transfer bytes carries the option, computed from the
//!   marks for the segment's exact range at every (re)transmission ([`SendMarks::annotation`]).
//! * TCPRDMA-02/07: the RID and total of a run are the ULP's, the same on all its segments.
//! * TCPRDMA-09: A is set exactly on segments that start at a marked message start; a segment
//!   that starts a message but holds no transfer bytes carries the 4-octet A-only form.
//! * TCPRDMA-06: a run without a known total produces the 16-octet form.
//! * TCPRDMA-21: a zero-length transfer ([`SendMarks::mark_empty`], e.g. a failed READ) is an
//!   option with data length 0 on the segment that starts at its position; that segment holds
//!   no transfer bytes.
//! * MSS accounting ([`MssAccounting`]): the connection uses RFC 6691 (the option's octets come
//!   out of the payload, so the packet fits the path); the draft §4 convention (option ignored)
//!   is kept for reproducing the draft's tables.

use std::collections::VecDeque;

use crate::checksum::{self, Sum};

use super::option::{
    decode_encoded, EncodedOption, RdmaAnnotation, RdmaOption, LEN_NO_TOTAL, RID_LIMIT,
};

/// Most runs a connection keeps queued (released as they are acknowledged).
pub const MAX_SEND_RUNS: usize = 4096;
/// Most message starts a connection keeps queued (released as they are acknowledged).
pub const MAX_SEND_MESSAGES: usize = 4096;

/// What the ULP says about a run of its send stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// RDMA ID (46 bits), chosen by the ULP (e.g. `op_index << 32 | xid` for ONC RPC).
    pub rid: u64,
    /// Offset in the receiver's buffer of the run's first byte (octets of the transfer before it).
    pub buffer_offset: u32,
    /// Total length of the transfer when known (then the 20-octet form, else the 16-octet one).
    pub total: Option<u32>,
    /// U: the receiver did not ask for this transfer (e.g. WRITE data, TCPRDMA-10).
    pub unsolicited: bool,
}

/// Why a mark was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnnotateError {
    /// The option was not negotiated on this connection (or the connection is in record mode).
    NotNegotiated,
    /// The RID does not fit 46 bits.
    BadRid,
    /// An empty run.
    Empty,
    /// The run starts before the end of an earlier one or before data already sent, or a
    /// message start lies before an earlier one or before data already sent.
    OutOfOrder,
    /// The run does not fit the 32-bit buffer offset or reaches past its total.
    TooLong,
    /// The table of runs or message starts is full ([`MAX_SEND_RUNS`], [`MAX_SEND_MESSAGES`]).
    Full,
}

/// How the option's octets count against the MSS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MssAccounting {
    /// Draft §4: the payload may be a whole MSS; the option is not counted.
    Draft,
    /// RFC 6691 §2: option octets beyond those of every segment reduce the payload, so
    /// payload + RDMA option <= EMSS (the connection's EMSS already leaves room for timestamps).
    Rfc6691,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Run {
    start: u64,
    end: u64,
    t: Transfer,
}

/// The send stream's transfer runs, zero-length transfers and message starts, in stream
/// offsets, sorted.
#[derive(Clone, Debug, Default)]
pub struct SendMarks {
    runs: VecDeque<Run>,
    /// Zero-length transfers: (position, transfer), sorted (TCPRDMA-21).
    empties: VecDeque<(u64, Transfer)>,
    messages: VecDeque<u64>,
    /// The run the last new segment came from, as [`SendMarks::next_segment_encoded`] found
    /// it: valid until the next mark or [`SendMarks::set_encoded`] (releases do not change
    /// it). While there is one, `out` holds its `encoded` words but for the buffer offset and
    /// data length, which each of its segments patches in.
    hot: Option<HotRun>,
    /// The option of the segment [`SendMarks::next_segment_encoded`] or
    /// [`SendMarks::set_encoded`] gave last (see [`SendMarks::encoded`]).
    out: EncodedOption,
    /// The ones'-complement sum of `out`'s octets (its padded length), as
    /// [`checksum::sum`] gives it: the header's checksum adds it instead of summing them.
    out_sum: Sum,
}

/// What option the segment [`SendMarks::next_segment_encoded`] cut carries (then in
/// [`SendMarks::encoded`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentOption {
    /// None.
    None,
    /// A form without a run (the A-only form).
    Other,
    /// A form with a run (or a zero-length transfer): the segment counts as annotated.
    Transfer,
}

impl SegmentOption {
    /// The kind of `e`.
    pub fn of(e: &EncodedOption) -> Self {
        match e.1 {
            0 => SegmentOption::None,
            n if n >= usize::from(LEN_NO_TOTAL) => SegmentOption::Transfer,
            _ => SegmentOption::Other,
        }
    }
}

/// A segment of a hot run ([`HotRun::cut`]): its length, data length, buffer offset, and the
/// sum of the run's option words that do not change.
type Cut = (u32, u16, u32, Sum);

/// A run that new segments are being cut from, with what its segments depend on: from `from`
/// (the offset it was found for) to the run's end, no message start lies at or after the
/// offset and no zero-length transfer is queued, so every segment there holds only this run's
/// octets from its start, up to the next run's start. Offsets are kept from `from`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct HotRun {
    from: u64,
    /// Octets from `from` to the run's end (not 0).
    span: u64,
    /// Octets from `from` to the next run's start (`u64::MAX - from` when none).
    next: u64,
    /// The buffer offset of the octet at `from`.
    bo: u32,
    /// The EMSS and accounting the run's segments are cut for ([`HotRun::key`]; never
    /// another's when the EMSS is not 1 to 65535), and the most octets a segment may then
    /// hold.
    key: u64,
    cap: u32,
    /// The option of the run's segments as it goes into the header, with buffer offset and
    /// data length 0 (each segment patches its own in).
    encoded: EncodedOption,
    /// The sum of `encoded` (the words each segment patches are 0 in it).
    fixed_sum: Sum,
}

impl HotRun {
    /// The hot run of `run` from `from` (inside it), the next run starting at `next_start`,
    /// for segments of at most `emss` octets counted with `acct`.
    fn new(run: Run, from: u64, next_start: u64, emss: u32, acct: MssAccounting) -> Self {
        let at_start = RdmaOption::Transfer(RdmaAnnotation {
            aligned: false,
            unsolicited: run.t.unsolicited,
            rid: run.t.rid,
            buffer_offset: 0,
            data_offset: 0,
            data_len: 0,
            total: run.t.total,
        });
        let encoded = at_start.encoded();
        // RFC 6691: the option's octets come out of the EMSS (which caps the run's part too).
        let cap = match acct {
            MssAccounting::Rfc6691 => emss.min(emss.saturating_sub(encoded.1 as u32).max(1)),
            MssAccounting::Draft => emss,
        };
        let valid = (1..=u32::from(u16::MAX)).contains(&emss);
        HotRun {
            from,
            span: run.end - from,
            next: next_start - from,
            // The marks keep a run's buffer offsets within 32 bits.
            bo: run.t.buffer_offset + (from - run.start) as u32,
            key: if valid {
                Self::key(emss, acct)
            } else {
                u64::MAX
            },
            cap,
            encoded,
            fixed_sum: sum_of(&encoded),
        }
    }

    /// The EMSS and the accounting as one word.
    #[inline]
    fn key(emss: u32, acct: MssAccounting) -> u64 {
        u64::from(emss) | u64::from(acct == MssAccounting::Rfc6691) << 32
    }

    /// True when `s` lies in the run from `from` and segments are cut for `emss` and `acct`.
    #[inline]
    fn holds(&self, s: u64, emss: u32, acct: MssAccounting) -> bool {
        s.wrapping_sub(self.from) < self.span && self.key == Self::key(emss, acct)
    }

    /// The segment from `s` with `avail` octets allowed and at most `emss` counted with `acct`,
    /// when [`Self::holds`] and `avail` is not 0 (`None` else): its length, the run's octets
    /// in it (from its start: the data offset is 0), their offset in the transfer's buffer,
    /// and `fixed_sum`.
    #[inline]
    fn cut(&self, s: u64, avail: u32, emss: u32, acct: MssAccounting) -> Option<Cut> {
        let k = s.wrapping_sub(self.from);
        if k >= self.span || self.key != Self::key(emss, acct) || avail == 0 {
            return None;
        }
        // The EMSS is 1 to 65535 (the key), so the room is too.
        let room = avail.min(self.cap);
        // The cut: the segment ends before the next run.
        let e = (k + u64::from(room)).min(self.next);
        let len = (e - k) as u32;
        // At most `len`, so at most 65535.
        let data_len = (self.span.min(e) - k) as u16;
        // Within the run, so within 32 bits.
        let buffer_offset = self.bo + k as u32;
        Some((len, data_len, buffer_offset, self.fixed_sum))
    }
}

impl SendMarks {
    /// Marks `[start, start + len)` as transfer bytes of `t`. Runs come in stream order and do
    /// not overlap; a run that continues the previous one (same RID, total and U, adjacent in
    /// the stream and in the buffer) extends it.
    pub fn mark_run(&mut self, start: u64, len: u32, t: Transfer) -> Result<(), AnnotateError> {
        self.set_hot(None);
        if t.rid >= RID_LIMIT {
            return Err(AnnotateError::BadRid);
        }
        if len == 0 {
            return Err(AnnotateError::Empty);
        }
        let end_in_buffer = u64::from(t.buffer_offset) + u64::from(len);
        if end_in_buffer > u64::from(u32::MAX) + 1
            || t.total.is_some_and(|n| end_in_buffer > u64::from(n))
        {
            return Err(AnnotateError::TooLong);
        }
        let end = start + u64::from(len);
        if self.empties.back().is_some_and(|&(p, _)| start <= p) {
            return Err(AnnotateError::OutOfOrder);
        }
        if let Some(last) = self.runs.back_mut() {
            if start < last.end {
                return Err(AnnotateError::OutOfOrder);
            }
            let continues = last.end == start
                && last.t.rid == t.rid
                && last.t.total == t.total
                && last.t.unsolicited == t.unsolicited
                && u64::from(last.t.buffer_offset) + (last.end - last.start)
                    == u64::from(t.buffer_offset);
            if continues {
                last.end = end;
                return Ok(());
            }
        }
        if self.runs.len() >= MAX_SEND_RUNS {
            return Err(AnnotateError::Full);
        }
        self.runs.push_back(Run { start, end, t });
        Ok(())
    }

    /// Marks a zero-length transfer of `t` at stream offset `at` (TCPRDMA-21: a failed READ
    /// tells the receiver to release its buffer): the segment that starts at `at` carries the
    /// option with data offset 0 and data length 0 and no transfer bytes. `at` may not lie
    /// inside a marked run; zero-length transfers come in stream order.
    pub fn mark_empty(&mut self, at: u64, t: Transfer) -> Result<(), AnnotateError> {
        self.set_hot(None);
        if t.rid >= RID_LIMIT {
            return Err(AnnotateError::BadRid);
        }
        if self.runs.back().is_some_and(|r| at < r.end)
            || self.empties.back().is_some_and(|&(p, _)| at < p)
        {
            return Err(AnnotateError::OutOfOrder);
        }
        if self.empties.len() >= MAX_SEND_RUNS {
            return Err(AnnotateError::Full);
        }
        self.empties.push_back((at, t));
        Ok(())
    }

    /// The zero-length transfer marked at `s`, if any.
    fn empty_at(&self, s: u64) -> Option<Transfer> {
        if self.empties.is_empty() {
            return None;
        }
        let i = self.empties.partition_point(|&(p, _)| p < s);
        self.empties
            .get(i)
            .filter(|&&(p, _)| p == s)
            .map(|&(_, t)| t)
    }

    /// Marks `at` as the first byte of a ULP message (A bit). Starts come in stream order.
    pub fn mark_message(&mut self, at: u64) -> Result<(), AnnotateError> {
        self.set_hot(None);
        match self.messages.back() {
            Some(&last) if at == last => return Ok(()),
            Some(&last) if at < last => return Err(AnnotateError::OutOfOrder),
            _ => {}
        }
        if self.messages.len() >= MAX_SEND_MESSAGES {
            return Err(AnnotateError::Full);
        }
        self.messages.push_back(at);
        Ok(())
    }

    /// Forgets what lies wholly below `una`: no segment starting below it is sent again.
    pub fn release(&mut self, una: u64) {
        while self.runs.front().is_some_and(|r| r.end <= una) {
            self.runs.pop_front();
        }
        while self.messages.front().is_some_and(|&m| m < una) {
            self.messages.pop_front();
        }
        while self.empties.front().is_some_and(|&(p, _)| p < una) {
            self.empties.pop_front();
        }
    }

    /// True when no run or message start is queued.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty() && self.messages.is_empty() && self.empties.is_empty()
    }

    /// The end of the last run (where the next run may start), if any.
    pub fn last_run_end(&self) -> Option<u64> {
        self.runs.back().map(|r| r.end)
    }

    /// The first run ending after `s`.
    fn run_from(&self, s: u64) -> Option<usize> {
        // Commonly the first run queued (runs are released as they are acknowledged).
        match self.runs.front() {
            None => return None,
            Some(r) if r.end > s => return Some(0),
            _ => {}
        }
        let i = self.runs.partition_point(|r| r.end <= s);
        (i < self.runs.len()).then_some(i)
    }

    /// The longest prefix (at least 1 octet) of `[s, s + len)` that holds at most one run
    /// (TCPRDMA-13); with `align_messages` also ending before any message start inside it, so
    /// that every message starts a segment (draft §4 segmentation A).
    pub fn cut(&self, s: u64, len: u32, align_messages: bool) -> u32 {
        let mut e = s + u64::from(len);
        if let Some(i) = self.run_from(s) {
            if self.runs[i].start < e {
                if let Some(next) = self.runs.get(i + 1) {
                    e = e.min(next.start);
                }
            }
        }
        if align_messages && self.messages.back().is_some_and(|&m| m > s) {
            let j = self.messages.partition_point(|&m| m <= s);
            if let Some(&m) = self.messages.get(j) {
                e = e.min(m);
            }
        }
        // TCPRDMA-21: a zero-length transfer starts its segment, which holds no run.
        if self.empties.is_empty() {
            return (e - s) as u32;
        }
        let j = self.empties.partition_point(|&(p, _)| p <= s);
        if let Some(&(p, _)) = self.empties.get(j) {
            e = e.min(p);
        }
        if self.empty_at(s).is_some() {
            if let Some(i) = self.run_from(s) {
                e = e.min(self.runs[i].start.max(s + 1));
            }
        }
        (e - s) as u32
    }

    /// The option for the segment `[s, s + len)` (cut by [`Self::cut`]): the run it holds, or
    /// the A-only form when it only starts a message, or none.
    pub fn annotation(&self, s: u64, len: u32) -> Option<RdmaOption> {
        let e = s + u64::from(len);
        let aligned = self.messages.front().is_some_and(|&m| m <= s)
            && self.messages.back().is_some_and(|&m| m >= s)
            && self.messages.binary_search(&s).is_ok();
        let run = self
            .run_from(s)
            .map(|i| self.runs[i])
            .filter(|r| r.start < e && len > 0);
        match run {
            Some(r) => {
                let from = r.start.max(s);
                let to = r.end.min(e);
                Some(RdmaOption::Transfer(RdmaAnnotation {
                    aligned,
                    unsolicited: r.t.unsolicited,
                    rid: r.t.rid,
                    // Transfer bytes before this segment's part of the run (draft §4).
                    buffer_offset: r.t.buffer_offset + (from - r.start) as u32,
                    data_offset: u16::try_from(from - s).ok()?,
                    data_len: u16::try_from(to - from).ok()?,
                    total: r.t.total,
                }))
            }
            None => match self.empty_at(s) {
                Some(t) => Some(RdmaOption::Transfer(RdmaAnnotation {
                    aligned,
                    unsolicited: t.unsolicited,
                    rid: t.rid,
                    buffer_offset: t.buffer_offset,
                    data_offset: 0,
                    data_len: 0,
                    total: t.total,
                })),
                None if aligned => Some(RdmaOption::Aligned { aligned: true }),
                None => None,
            },
        }
    }

    /// The next new segment from `s` with `avail` octets allowed (window, cwnd, queued data,
    /// EMSS): its length and option, after the one-run cut and the MSS accounting. The
    /// decoded form of [`Self::next_segment_encoded`] (tests and tools).
    pub fn next_segment(
        &mut self,
        s: u64,
        avail: u32,
        emss: u32,
        acct: MssAccounting,
        align_messages: bool,
    ) -> (u32, Option<RdmaOption>) {
        let (len, _) = self.next_segment_encoded(s, avail, emss, acct, align_messages);
        (len, decode_encoded(&self.out))
    }

    /// The next new segment from `s` with `avail` octets allowed (window, cwnd, queued data,
    /// EMSS): its length after the one-run cut and the MSS accounting, and what option it
    /// carries, left in [`Self::encoded`] as it goes into the header (inside a run, the run's
    /// words with the segment's fields patched in). Inline: the shortcut for a segment of the
    /// hot run.
    #[inline]
    pub fn next_segment_encoded(
        &mut self,
        s: u64,
        avail: u32,
        emss: u32,
        acct: MssAccounting,
        align_messages: bool,
    ) -> (u32, SegmentOption) {
        if let Some(cut) = self.hot.as_ref().and_then(|h| h.cut(s, avail, emss, acct)) {
            return (self.write_run_option(cut), SegmentOption::Transfer);
        }
        self.next_segment_encoded_slow(s, avail, emss, acct, align_messages)
    }

    /// [`Self::next_segment_encoded`]'s shortcut alone: the length of the segment from `s` when
    /// the hot run gives it (its option then in [`Self::encoded`], a form with a run), else
    /// `None` with nothing changed ([`Self::next_segment_encoded`] judges it).
    #[inline(always)]
    pub fn next_segment_hot(
        &mut self,
        s: u64,
        avail: u32,
        emss: u32,
        acct: MssAccounting,
    ) -> Option<u32> {
        let cut = self.hot.as_ref()?.cut(s, avail, emss, acct)?;
        Some(self.write_run_option(cut))
    }

    /// [`Self::next_segment_encoded`] whole, out of line (the shortcut did not give the
    /// segment: no hot run yet, or `s` outside it): the hot run found for `s`, its cut, else
    /// the general path.
    #[inline(never)]
    fn next_segment_encoded_slow(
        &mut self,
        s: u64,
        avail: u32,
        emss: u32,
        acct: MssAccounting,
        align_messages: bool,
    ) -> (u32, SegmentOption) {
        if !self.hot.is_some_and(|h| h.holds(s, emss, acct)) {
            self.set_hot(self.hot_run(s, emss, acct));
        }
        let cut = self.hot.as_ref().and_then(|h| h.cut(s, avail, emss, acct));
        match cut {
            Some(cut) => (self.write_run_option(cut), SegmentOption::Transfer),
            None => {
                let (len, opt) = self.next_segment_general(s, avail, emss, acct, align_messages);
                (len, self.set_encoded(opt))
            }
        }
    }

    /// Leaves the option of the hot run's segment `cut` ([`HotRun::cut`]) in `out`: the run's
    /// words with the segment's buffer offset and data length; returns the segment's length.
    #[inline(always)]
    fn write_run_option(&mut self, (len, data_len, buffer_offset, fixed): Cut) -> u32 {
        let (bo, dl) = (buffer_offset.to_be_bytes(), data_len.to_be_bytes());
        self.out.0[8..12].copy_from_slice(&bo);
        self.out.0[14..16].copy_from_slice(&dl);
        // The run's words, then the two patched in (data offset 0) as native-endian words:
        // the sum `checksum::sum` gives for the octets.
        self.out_sum = fixed
            + Sum::from(u32::from_ne_bytes(bo))
            + Sum::from(u32::from_ne_bytes([0, 0, dl[0], dl[1]]));
        len
    }

    /// Replaces the hot run (`out` gets its words).
    fn set_hot(&mut self, hot: Option<HotRun>) {
        self.hot = hot;
        if let Some(h) = hot {
            self.out = h.encoded;
        }
    }

    /// Sets the option [`Self::encoded`] returns (a segment sent again, or one that the hot
    /// run does not give): `out` no longer holds the hot run's words, so it is dropped.
    pub fn set_encoded(&mut self, opt: Option<RdmaOption>) -> SegmentOption {
        self.hot = None;
        self.out = opt.map_or(([0; 20], 0), |o| o.encoded());
        self.out_sum = sum_of(&self.out);
        SegmentOption::of(&self.out)
    }

    /// The option of the segment cut last by [`Self::next_segment_encoded`] or set by
    /// [`Self::set_encoded`], as it goes into the header (length 0: none).
    #[inline]
    pub fn encoded(&self) -> &EncodedOption {
        &self.out
    }

    /// [`Self::encoded`] with the ones'-complement sum of its octets (what [`checksum::sum`]
    /// gives for them), for the header's checksum.
    #[inline]
    pub fn encoded_with_sum(&self) -> (&EncodedOption, Sum) {
        (&self.out, self.out_sum)
    }

    /// The run that segments from `s` are cut from, in the common case of a bulk transfer:
    /// `s` inside a run, no message start at or after `s`, no zero-length transfer queued.
    fn hot_run(&self, s: u64, emss: u32, acct: MssAccounting) -> Option<HotRun> {
        if !self.empties.is_empty() || self.messages.back().is_some_and(|&m| m >= s) {
            return None;
        }
        let i = self.run_from(s)?;
        let run = self.runs[i];
        let next_start = self.runs.get(i + 1).map_or(u64::MAX, |n| n.start);
        (run.start <= s).then(|| HotRun::new(run, s, next_start, emss, acct))
    }

    /// [`Self::next_segment_encoded`] for any marks, the option decoded.
    fn next_segment_general(
        &self,
        s: u64,
        avail: u32,
        emss: u32,
        acct: MssAccounting,
        align_messages: bool,
    ) -> (u32, Option<RdmaOption>) {
        let mut len = self.cut(s, avail.min(emss), align_messages);
        let mut opt = self.annotation(s, len);
        if let (MssAccounting::Rfc6691, Some(o)) = (acct, opt) {
            let budget = emss.saturating_sub(o.padded_len() as u32).max(1);
            if len > budget {
                // What `cut` ends a segment at does not depend on how long it may be, so the
                // cut of the shorter budget is the budget: `cut(s, budget) == budget` here.
                debug_assert_eq!(self.cut(s, budget, align_messages), budget);
                len = budget;
                opt = match opt {
                    // The run still starts inside: only its part in the segment shrinks.
                    Some(RdmaOption::Transfer(mut a))
                        if a.data_len > 0 && u32::from(a.data_offset) < budget =>
                    {
                        let room = budget - u32::from(a.data_offset);
                        a.data_len = a.data_len.min(room.min(u32::from(u16::MAX)) as u16);
                        Some(RdmaOption::Transfer(a))
                    }
                    Some(RdmaOption::Transfer(a)) if a.data_len > 0 => self.annotation(s, len),
                    // A zero-length transfer or a message start: the same for any length.
                    other => other,
                };
                debug_assert_eq!(opt, self.annotation(s, len));
            }
        }
        (len, opt)
    }
}

/// The ones'-complement sum of an encoded option's octets (its padded length), word by word
/// for the forms with a run.
fn sum_of(e: &EncodedOption) -> Sum {
    match e.0.first_chunk::<16>() {
        Some(sixteen) if e.1 == 16 => checksum::sum_words(sixteen),
        _ if e.1 == e.0.len() => checksum::sum_words(&e.0),
        _ => checksum::sum(&e.0[..e.1.min(e.0.len())], 0),
    }
}

#[cfg(test)]
#[path = "annotate_tests.rs"]
mod tests;
