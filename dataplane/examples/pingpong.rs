//! Ping-pong over RDMAP Sends: the client sends `size` bytes, the server sends them back,
//! `iters` times; the client checks each echo and prints the mean round trip.
//!
//! ```text
//! cargo run -p dataplane --example pingpong -- server 127.0.0.1:7471
//! cargo run -p dataplane --example pingpong -- client 127.0.0.1:7471 [ITERS] [SIZE]
//! ```
//! Add `--xdp IFACE` to either side for the AF_XDP transport (root).

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{arg, device, wait_ok, Error};
use dataplane::{Access, ConnectionConfig, Device, Listener, Opcode};

/// Serves one client: echoes each message until an empty one. Returns the messages echoed.
pub fn serve(dev: &Device, listener: &Listener) -> Result<usize, Error> {
    let (init, cq) = dev.qp_init();
    let buf = init.pd.register(1 << 16, Access::LOCAL_WRITE)?;
    let out = init.pd.register(1 << 16, Access::default())?;
    let incoming = listener.accept()?;
    // The first receive goes up before the Reply: the client may send at once.
    let qp = incoming.accept_with(init, b"", |qp| qp.post_recv(0, &buf, 0..buf.len()))?;
    let mut echoed = 0;
    loop {
        let c = wait_ok(&cq, "receive")?;
        if c.opcode != Opcode::Recv {
            continue; // an echo's Send completion
        }
        let len = c.byte_len as usize;
        if len == 0 {
            return Ok(echoed);
        }
        // The next receive first, then the echo from the same bytes: the client sends again
        // only after the echo, and the echo is read before the buffer is reused.
        let echo = buf.read_vec(0, len).ok_or("message too long")?;
        out.write(0, &echo).ok_or("message too long")?;
        qp.post_recv(0, &buf, 0..buf.len())?;
        qp.post_send(1, &out, 0..len)?;
        wait_ok(&cq, "echo")?;
        echoed += 1;
    }
}

/// Runs `iters` round trips of `size` bytes against `addr`; returns the mean round trip.
pub fn client(
    dev: &Device,
    addr: SocketAddr,
    iters: usize,
    size: usize,
) -> Result<Duration, Error> {
    let (init, cq) = dev.qp_init();
    let ping = init.pd.register(size.max(1), Access::LOCAL_WRITE)?;
    let pong = init.pd.register(size.max(1), Access::LOCAL_WRITE)?;
    let qp = dev.connect(addr, init, &ConnectionConfig::default(), b"")?;
    let start = Instant::now();
    for i in 0..iters {
        let msg: Vec<u8> = (0..size).map(|j| (i + j) as u8).collect();
        ping.write(0, &msg).ok_or("size")?;
        qp.post_recv(2, &pong, 0..size)?;
        qp.post_send(1, &ping, 0..size)?;
        let (a, b) = (wait_ok(&cq, "ping")?, wait_ok(&cq, "pong")?);
        let recv = if a.opcode == Opcode::Recv { a } else { b };
        if recv.byte_len as usize != size || pong.read_vec(0, size) != Some(msg) {
            return Err(format!("echo {i} differs").into());
        }
    }
    let mean = start.elapsed() / iters.max(1) as u32;
    qp.post_send(3, &ping, 0..0)?; // the end
    wait_ok(&cq, "end")?;
    Ok(mean)
}

fn main() -> Result<(), Error> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let dev = device(&mut args)?;
    let addr: SocketAddr = arg(&args, 1, "127.0.0.1:7471".parse()?)?;
    match args.first().map(String::as_str) {
        Some("server") => {
            let l = dev.listen(addr, ConnectionConfig::default())?;
            println!("echoed {} messages", serve(&dev, &l)?);
        }
        Some("client") => {
            let (iters, size) = (arg(&args, 2, 1000)?, arg(&args, 3, 64)?);
            let rtt = client(&dev, addr, iters, size)?;
            println!("{iters} round trips of {size} bytes: mean {rtt:?}");
        }
        _ => return Err("usage: pingpong server|client ADDR [ITERS] [SIZE] [--xdp IFACE]".into()),
    }
    Ok(())
}
