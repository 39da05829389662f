//! What the storage tests drive: a client of the block store that keeps several calls in
//! flight, each on its own slot of a buffer it owns. [`RpcRdmaClient`] is the xwarpd store's
//! RPC-over-RDMA client; another kind of client (ONC RPC over TCP, say) implements the same
//! trait and the tests run unchanged.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

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

/// The xwarpd store's client: RPC-over-RDMA on one connection, pipelined by XID (at most
/// [`MAX_IN_FLIGHT`] calls, within the server's credits).
pub struct RpcRdmaClient {
    client: StoreClient,
    buf: Option<Arc<MemoryRegion>>,
    block: usize,
    /// The store's size, asked once.
    size: Option<u64>,
}

impl RpcRdmaClient {
    /// Connects through `device` to the store server at `addr`.
    pub fn connect(
        device: &Device,
        addr: SocketAddr,
        connection: dataplane::ConnectionConfig,
    ) -> Result<Self, String> {
        let opts = ClientOptions {
            transport: device.transport().clone(),
            connection,
            call_timeout: Duration::from_secs(30),
        };
        let client = StoreClient::connect_on(device, addr, &opts)
            .map_err(|e| format!("cannot reach {addr}: {e}"))?;
        Ok(Self {
            client,
            buf: None,
            block: 0,
            size: None,
        })
    }

    fn buf(&self) -> Result<&Arc<MemoryRegion>, String> {
        self.buf
            .as_ref()
            .ok_or_else(|| "no buffer: prepare() first".to_string())
    }
}

impl BlockClient for RpcRdmaClient {
    fn store_size(&mut self) -> Result<u64, String> {
        if let Some(s) = self.size {
            return Ok(s);
        }
        let a = self
            .client
            .getattr()
            .map_err(|e| format!("GETATTR failed: {e}"))?;
        self.size = Some(a.size);
        Ok(a.size)
    }

    fn max_in_flight(&self) -> usize {
        MAX_IN_FLIGHT
    }

    fn prepare(&mut self, block: usize, slots: usize) -> Result<(), String> {
        let len = block * slots;
        self.buf = None;
        let mr = self
            .client
            .pd()
            .register(len, Access::ALL)
            .map_err(|e| format!("cannot register {len} bytes: {e}"))?;
        self.buf = Some(Arc::new(mr));
        self.block = block;
        Ok(())
    }

    fn start(&mut self, read: bool, offset: u64, slot: usize) -> Result<CallTag, String> {
        let buf = self.buf()?.clone();
        let range = slot * self.block..(slot + 1) * self.block;
        let id = if read {
            self.client.start_read(offset, &buf, range)
        } else {
            self.client.start_write(offset, &buf, range, false)
        };
        id.map(|CallId(x)| u64::from(x)).map_err(call_error)
    }

    fn wait_any(&mut self) -> Result<CallTag, String> {
        let (CallId(x), r) = self.client.wait_any().map_err(call_error)?;
        r.map_err(call_error)?;
        Ok(u64::from(x))
    }

    fn fill(&mut self, slot: usize, data: &[u8]) -> Result<(), String> {
        self.buf()?
            .write(slot * self.block, data)
            .ok_or_else(|| format!("slot {slot} is outside the buffer"))
    }

    fn contents(&self, slot: usize) -> Result<Vec<u8>, String> {
        self.buf()?
            .read_vec(slot * self.block, self.block)
            .ok_or_else(|| format!("slot {slot} is outside the buffer"))
    }
}

fn call_error(e: StoreError) -> String {
    e.to_string()
}
