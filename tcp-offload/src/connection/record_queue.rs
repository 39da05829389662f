//! Queueing a run of records with the connection's state and mode checked once.

use super::{Connection, SendError};
use crate::tx::RecordId;

/// Record mode: queues records one after another into a connection whose state and send mode
/// were checked when it was made ([`Connection::record_queue`]). Nothing else can change them
/// while it holds the connection, so each [`RecordQueue::push`] checks only the record itself;
/// a run pushed here queues the same records, with the same results, as
/// [`Connection::send_record`] called for each.
pub struct RecordQueue<'a> {
    conn: &'a mut Connection,
}

impl Connection {
    /// A [`RecordQueue`] for this connection: `InvalidState` when it cannot send, `WrongMode`
    /// when record mode is off (what [`Connection::send_record`] would return).
    pub fn record_queue(&mut self) -> Result<RecordQueue<'_>, SendError> {
        self.check_sendable_records()?;
        Ok(RecordQueue { conn: self })
    }
}

impl RecordQueue<'_> {
    /// Queues a record of `len` octets, as [`Connection::send_record`]: returns its stream
    /// offset, or `EmptyRecord` / `BufferFull` (nothing queued).
    #[inline]
    pub fn push(&mut self, len: u32, id: RecordId) -> Result<u64, SendError> {
        self.conn.check_record_len(len)?;
        Ok(self.conn.push_record(len, id))
    }
}
