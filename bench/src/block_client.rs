//! What the storage tests drive: a client of the block store that keeps several calls in
//! flight, each on its own slot of a buffer it owns. [`RpcRdmaClient`] is the xwarpd store's
//! RPC-over-RDMA client; another kind of client (ONC RPC over TCP, say) implements the same
//! trait and the tests run unchanged.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dataplane::{Access, Device, MemoryRegion};
use xwarpd::store::{CallId, ClientOptions, StoreClient, StoreError, MAX_IN_FLIGHT};

/// A call in flight, as the client numbers it.
pub type CallTag = u64;

/// A block-store client with calls in flight. Errors are one line, ready to print.
pub trait BlockClient {
    /// The store's size in bytes: offsets stay below it.
    fn store_size(&mut self) -> Result<u64, String>;
    /// The most calls this client keeps in flight.
    fn max_in_flight(&self) -> usize;
    /// Sets up `slots` buffers of `block` bytes each for the calls that follow (the earlier
    /// ones are dropped: call it with no call in flight).
    fn prepare(&mut self, block: usize, slots: usize) -> Result<(), String>;
    /// Starts a READ of the block at `offset` into `slot`, or a WRITE of `slot` to it; waits
    /// while the client cannot take another call.
    fn start(&mut self, read: bool, offset: u64, slot: usize) -> Result<CallTag, String>;
    /// Waits for the next call to end and returns it; a failed call is an error.
    fn wait_any(&mut self) -> Result<CallTag, String>;
    /// Puts `data` (a block) into `slot` before a WRITE.
    fn fill(&mut self, slot: usize, data: &[u8]) -> Result<(), String>;
    /// What `slot` holds (after a READ).
    fn contents(&self, slot: usize) -> Result<Vec<u8>, String>;
}

/// The xwarpd store's client: RPC-over-RDMA, pipelined by XID on each of one or more
/// connections (at most [`MAX_IN_FLIGHT`] calls on each, within the server's credits). Slot `s`
/// goes over connection `s % n`; with several connections, waiting polls them in turn.
pub struct RpcRdmaClient {
    conns: Vec<Connection>,
    block: usize,
    /// The store's size, asked once.
    size: Option<u64>,
    /// The connection polled first next time (turns go round).
    next: usize,
}

/// One connection and the buffer of its slots.
struct Connection {
    client: StoreClient,
    buf: Option<Arc<MemoryRegion>>,
}

/// How long a call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Connections needed for `depth` calls in flight.
pub fn connections_for(depth: u32) -> usize {
    (depth as usize).div_ceil(MAX_IN_FLIGHT).max(1)
}

impl RpcRdmaClient {
    /// What MPA negotiated on the first connection (all are made alike).
    pub fn negotiated(&self) -> dataplane::NegotiatedFraming {
        self.conns[0].client.negotiated()
    }

    /// Opens `connections` connections through `device` to the store server at `addr`.
    pub fn connect(
        device: &Device,
        addr: SocketAddr,
        connection: dataplane::ConnectionConfig,
        connections: usize,
    ) -> Result<Self, String> {
        let opts = ClientOptions {
            transport: device.transport().clone(),
            connection,
            call_timeout: CALL_TIMEOUT,
        };
        let conns = (0..connections.max(1))
            .map(|_| {
                let client = StoreClient::connect_on(device, addr, &opts)
                    .map_err(|e| format!("cannot reach {addr}: {e}"))?;
                Ok(Connection { client, buf: None })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Self {
            conns,
            block: 0,
            size: None,
            next: 0,
        })
    }

    /// Connection and slot within its buffer of `slot`.
    fn place(&self, slot: usize) -> (usize, usize) {
        (slot % self.conns.len(), slot / self.conns.len())
    }

    fn buf(&self, conn: usize) -> Result<&Arc<MemoryRegion>, String> {
        self.conns[conn]
            .buf
            .as_ref()
            .ok_or_else(|| "no buffer: prepare() first".to_string())
    }

    /// Polls every connection in turn until one has an answer.
    fn poll_all(&mut self) -> Result<CallTag, String> {
        let deadline = Instant::now() + CALL_TIMEOUT;
        let n = self.conns.len();
        let mut spins = 0u32;
        loop {
            for k in 0..n {
                let i = (self.next + k) % n;
                if let Some((CallId(x), r)) = self.conns[i].client.poll_any().map_err(call_error)? {
                    r.map_err(call_error)?;
                    self.next = (i + 1) % n;
                    return Ok(tag(i, x));
                }
            }
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(64) {
                if Instant::now() > deadline {
                    return Err(call_error(StoreError::Timeout));
                }
                std::thread::yield_now();
            }
        }
    }
}

/// The tag of call `xid` on connection `conn`.
fn tag(conn: usize, xid: u32) -> CallTag {
    ((conn as u64) << 32) | u64::from(xid)
}

impl BlockClient for RpcRdmaClient {
    fn store_size(&mut self) -> Result<u64, String> {
        if let Some(s) = self.size {
            return Ok(s);
        }
        let a = self.conns[0]
            .client
            .getattr()
            .map_err(|e| format!("GETATTR failed: {e}"))?;
        self.size = Some(a.size);
        Ok(a.size)
    }

    fn max_in_flight(&self) -> usize {
        MAX_IN_FLIGHT * self.conns.len()
    }

    fn prepare(&mut self, block: usize, slots: usize) -> Result<(), String> {
        let len = block * slots.div_ceil(self.conns.len());
        for c in &mut self.conns {
            c.buf = None;
            let mr = c
                .client
                .pd()
                .register(len, Access::ALL)
                .map_err(|e| format!("cannot register {len} bytes: {e}"))?;
            c.buf = Some(Arc::new(mr));
        }
        self.block = block;
        Ok(())
    }

    fn start(&mut self, read: bool, offset: u64, slot: usize) -> Result<CallTag, String> {
        let (conn, at) = self.place(slot);
        let buf = self.buf(conn)?.clone();
        let range = at * self.block..(at + 1) * self.block;
        let client = &mut self.conns[conn].client;
        let id = if read {
            client.start_read(offset, &buf, range)
        } else {
            client.start_write(offset, &buf, range, false)
        };
        id.map(|CallId(x)| tag(conn, x)).map_err(call_error)
    }

    fn wait_any(&mut self) -> Result<CallTag, String> {
        if self.conns.len() > 1 {
            return self.poll_all();
        }
        let (CallId(x), r) = self.conns[0].client.wait_any().map_err(call_error)?;
        r.map_err(call_error)?;
        Ok(tag(0, x))
    }

    fn fill(&mut self, slot: usize, data: &[u8]) -> Result<(), String> {
        let (conn, at) = self.place(slot);
        self.buf(conn)?
            .write(at * self.block, data)
            .ok_or_else(|| format!("slot {slot} is outside the buffer"))
    }

    fn contents(&self, slot: usize) -> Result<Vec<u8>, String> {
        let (conn, at) = self.place(slot);
        self.buf(conn)?
            .read_vec(at * self.block, self.block)
            .ok_or_else(|| format!("slot {slot} is outside the buffer"))
    }
}

fn call_error(e: StoreError) -> String {
    e.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_connection_per_sixteen_calls() {
        assert_eq!(connections_for(1), 1);
        assert_eq!(connections_for(16), 1);
        assert_eq!(connections_for(17), 2);
        assert_eq!(connections_for(40), 3);
        assert_eq!(connections_for(256), 16);
    }

    #[test]
    fn tags_keep_the_connection_and_the_xid_apart() {
        assert_eq!(tag(0, 7), 7);
        assert_ne!(tag(1, 7), tag(2, 7));
        assert_eq!(tag(3, u32::MAX) >> 32, 3);
    }
}
