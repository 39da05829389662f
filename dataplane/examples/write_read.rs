//! RDMA Write and Read with verification, from memory the application owns: the server
//! advertises a window (STag and length in its MPA Reply); the client registers its own
//! `Vec<u8>` in place, RDMA Writes it into the window, RDMA Reads the window back into a
//! second buffer of its own through a two-element scatter-gather list, compares, and takes
//! both buffers back.
//!
//! ```text
//! cargo run -p dataplane --example write_read -- server 127.0.0.1:7472 [LEN]
//! cargo run -p dataplane --example write_read -- client 127.0.0.1:7472
//! ```
//! Add `--xdp IFACE` to either side for the AF_XDP transport (root).

mod common;

use std::net::SocketAddr;

use common::{arg, device, wait_ok, window_from_bytes, window_to_bytes, Error};
use dataplane::{
    Access, ConnectionConfig, Device, Listener, PostKind, RemoteAddr, Sge, WorkRequest,
};

/// Serves one client a window of `len` bytes; returns the window's bytes once the client
/// says it is done (an empty Send).
pub fn serve(dev: &Device, listener: &Listener, len: usize) -> Result<Vec<u8>, Error> {
    let (init, cq) = dev.qp_init();
    let window = init
        .pd
        .register_owned(vec![0u8; len], Access::REMOTE_WRITE | Access::REMOTE_READ)?;
    let done = init.pd.register(1, Access::LOCAL_WRITE)?;
    let reply = window_to_bytes(window.stag(), len as u64);
    let incoming = listener.accept()?;
    let qp = incoming.accept_with(init, &reply, |qp| qp.post_recv(0, &done, 0..1))?;
    wait_ok(&cq, "the client's done message")?;
    drop(qp);
    // The connection is closed: no peer reaches the window any more.
    window
        .into_inner()
        .map_err(|_| "the window is the server's own buffer".into())
}

/// Writes `data` into the server's window at `addr`, reads it back and compares.
pub fn client(dev: &Device, addr: SocketAddr, data: Vec<u8>) -> Result<(), Error> {
    let (init, cq) = dev.qp_init();
    let len = data.len();
    let qp = dev.connect(addr, init.clone(), &ConnectionConfig::default(), b"")?;
    let (stag, window) = window_from_bytes(qp.peer_private_data())?;
    if (window as usize) < len {
        return Err(format!("the window has {window} bytes, {len} needed").into());
    }
    // The application's own buffers, registered in place (no copy).
    let src = init.pd.register_owned(data, Access::default())?;
    let dst = init
        .pd
        .register_owned(vec![0u8; len], Access::LOCAL_WRITE)?;
    let remote = RemoteAddr { stag, to: 0 };
    qp.post_write(1, &src, 0..len, remote)?;
    wait_ok(&cq, "RDMA Write")?;
    // One Read, scattered into the two halves of `dst` in reverse order.
    let half = len / 2;
    let sgl = [Sge::new(&dst, half..len), Sge::new(&dst, 0..half)];
    qp.post_list(&[WorkRequest::new(2, PostKind::Read(remote), &sgl)])?;
    wait_ok(&cq, "RDMA Read")?;
    qp.post_send(3, &src, 0..0)?;
    wait_ok(&cq, "done message")?;
    let sent = src.into_inner().map_err(|_| "src")?;
    let got = dst.into_inner().map_err(|_| "dst")?;
    // dst[half..] holds the window's first len - half bytes, dst[..half] the rest.
    let ok = got[half..] == sent[..len - half] && got[..half] == sent[len - half..];
    if !ok {
        return Err("the data read back differs from the data written".into());
    }
    Ok(())
}

fn main() -> Result<(), Error> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let dev = device(&mut args)?;
    let addr: SocketAddr = arg(&args, 1, "127.0.0.1:7472".parse()?)?;
    let len: usize = arg(&args, 2, 1 << 20)?;
    match args.first().map(String::as_str) {
        Some("server") => {
            let l = dev.listen(addr, ConnectionConfig::default())?;
            let w = serve(&dev, &l, len)?;
            println!(
                "window filled: {} bytes, sum {}",
                w.len(),
                w.iter().map(|&b| b as u64).sum::<u64>()
            );
        }
        Some("client") => {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 + i / 251) as u8).collect();
            client(&dev, addr, data)?;
            println!("wrote and read back {len} bytes: identical");
        }
        _ => return Err("usage: write_read server|client ADDR [LEN] [--xdp IFACE]".into()),
    }
    Ok(())
}
