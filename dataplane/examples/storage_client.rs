//! A small block-storage client over RDMA: the server exposes a file as a window of blocks
//! (a file-backed region: RDMA Writes land in the page cache, RDMA Reads read the file); the
//! client writes and reads blocks with RDMA Write and Read and makes them durable with a
//! COMMIT message, which the server answers after `msync`.
//!
//! ```text
//! cargo run -p dataplane --example storage_client -- server 127.0.0.1:7473 /tmp/disk.img [BLOCKS]
//! cargo run -p dataplane --example storage_client -- client 127.0.0.1:7473 [BLOCKS]
//! ```
//! Add `--xdp IFACE` to either side for the AF_XDP transport (root).

mod common;

use std::net::SocketAddr;
use std::path::Path;

use common::{arg, device, wait_ok, window_from_bytes, window_to_bytes, Error};
use dataplane::{
    Access, CompletionQueue, ConnectionConfig, Device, Listener, MemoryRegion, Opcode, QueuePair,
    RemoteAddr,
};

/// Bytes per block.
pub const BLOCK: usize = 4096;
const COMMIT: &[u8] = b"COMMIT";
const DONE: &[u8] = b"OK";

/// Serves one client from the file at `path`, `blocks` blocks long (created or extended).
/// Answers each COMMIT after writing the file back; returns when the client closes.
pub fn serve(dev: &Device, listener: &Listener, path: &Path, blocks: usize) -> Result<(), Error> {
    let len = blocks * BLOCK;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    if file.metadata()?.len() < len as u64 {
        file.set_len(len as u64)?;
    }
    let (init, cq) = dev.qp_init();
    let disk = init
        .pd
        .register_file(&file, len, Access::REMOTE_WRITE | Access::REMOTE_READ)?;
    let msg = init.pd.register(64, Access::LOCAL_WRITE)?;
    let ok = init.pd.register_from(DONE, Access::default())?;
    let reply = window_to_bytes(disk.stag(), len as u64);
    let incoming = listener.accept()?;
    let qp = incoming.accept_with(init, &reply, |qp| qp.post_recv(0, &msg, 0..64))?;
    loop {
        let Some(c) = cq.wait(common::TIMEOUT) else {
            return Err("the client went quiet".into());
        };
        match (c.opcode, c.is_ok()) {
            (Opcode::Recv, true)
                if msg.read_vec(0, c.byte_len as usize).as_deref() == Some(COMMIT) =>
            {
                disk.sync()?;
                qp.post_recv(0, &msg, 0..64)?;
                qp.post_send(1, &ok, 0..DONE.len())?;
            }
            (Opcode::Send, true) => {}
            // The client closed (its receive flushed) or sent something else: done.
            _ => return Ok(()),
        }
    }
}

/// A client's connection to a block server.
pub struct BlockClient {
    qp: QueuePair,
    cq: CompletionQueue,
    disk: RemoteAddr,
    blocks: u64,
    /// The client's staging buffer for one block, and the COMMIT message and its answer.
    block: MemoryRegion,
    commit: MemoryRegion,
    answer: MemoryRegion,
}

impl BlockClient {
    /// Connects to the server at `addr`.
    pub fn connect(dev: &Device, addr: SocketAddr) -> Result<Self, Error> {
        let (init, cq) = dev.qp_init();
        let qp = dev.connect(addr, init.clone(), &ConnectionConfig::default(), b"")?;
        let (stag, len) = window_from_bytes(qp.peer_private_data())?;
        Ok(BlockClient {
            qp,
            cq,
            disk: RemoteAddr { stag, to: 0 },
            blocks: len / BLOCK as u64,
            block: init
                .pd
                .register_owned(vec![0u8; BLOCK], Access::LOCAL_WRITE)?,
            commit: init.pd.register_from(COMMIT, Access::default())?,
            answer: init.pd.register(64, Access::LOCAL_WRITE)?,
        })
    }

    /// The server's size in blocks.
    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    fn at(&self, lba: u64) -> Result<RemoteAddr, Error> {
        if lba >= self.blocks {
            return Err(format!("block {lba} past the end ({} blocks)", self.blocks).into());
        }
        Ok(RemoteAddr {
            to: lba * BLOCK as u64,
            ..self.disk
        })
    }

    /// Writes one block (not yet durable: see [`BlockClient::commit`]).
    pub fn write_block(&self, lba: u64, data: &[u8; BLOCK]) -> Result<(), Error> {
        self.block.write(0, data).ok_or("block")?;
        self.qp
            .post_write(lba, &self.block, 0..BLOCK, self.at(lba)?)?;
        wait_ok(&self.cq, "block write")?;
        Ok(())
    }

    /// Reads one block.
    pub fn read_block(&self, lba: u64) -> Result<Vec<u8>, Error> {
        self.qp
            .post_read(lba, &self.block, 0..BLOCK, self.at(lba)?)?;
        wait_ok(&self.cq, "block read")?;
        Ok(self.block.read_vec(0, BLOCK).ok_or("block")?)
    }

    /// Makes every block written so far durable on the server (RDMA Writes are placed in
    /// order before the COMMIT Send that follows them).
    pub fn commit(&self) -> Result<(), Error> {
        self.qp.post_recv(0, &self.answer, 0..64)?;
        self.qp.post_send(1, &self.commit, 0..COMMIT.len())?;
        for _ in 0..2 {
            wait_ok(&self.cq, "commit")?;
        }
        match self.answer.read_vec(0, DONE.len()) {
            Some(a) if a == DONE => Ok(()),
            _ => Err("the server did not confirm the commit".into()),
        }
    }
}

/// The example's workload: writes `count` blocks of a pattern, commits, reads them back.
pub fn client(dev: &Device, addr: SocketAddr, count: u64) -> Result<(), Error> {
    let c = BlockClient::connect(dev, addr)?;
    let block =
        |lba: u64| -> [u8; BLOCK] { std::array::from_fn(|i| (lba as usize * 31 + i) as u8) };
    for lba in 0..count.min(c.blocks()) {
        c.write_block(lba, &block(lba))?;
    }
    c.commit()?;
    for lba in 0..count.min(c.blocks()) {
        if c.read_block(lba)? != block(lba) {
            return Err(format!("block {lba} differs").into());
        }
    }
    Ok(())
}

fn main() -> Result<(), Error> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let dev = device(&mut args)?;
    let addr: SocketAddr = arg(&args, 1, "127.0.0.1:7473".parse()?)?;
    match args.first().map(String::as_str) {
        Some("server") => {
            let path: String = arg(&args, 2, "/tmp/xwarp-disk.img".to_string())?;
            let blocks = arg(&args, 3, 256)?;
            let l = dev.listen(addr, ConnectionConfig::default())?;
            serve(&dev, &l, Path::new(&path), blocks)?;
        }
        Some("client") => {
            let count = arg(&args, 2, 64)?;
            client(&dev, addr, count)?;
            println!("{count} blocks written, committed and read back");
        }
        _ => return Err(
            "usage: storage_client server ADDR FILE [BLOCKS] | client ADDR [BLOCKS] [--xdp IFACE]"
                .into(),
        ),
    }
    Ok(())
}
