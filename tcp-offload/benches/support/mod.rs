//! What `benches/segment.rs` and `examples/segment_profile.rs` share: the record pattern, the
//! configuration and an established connection pair.

use tcp_offload::Timestamp;

use tcp_offload::{Config, Connection, FourTuple, IsnGenerator, RecordId, RecordSource, State};

/// Segments per batch.
pub const BATCH: usize = 2048;
/// Payload octets per segment (one record each).
pub const SEG: usize = 1448;

/// Record bytes as a function of (id, offset).
pub struct Pattern;
impl RecordSource for Pattern {
    fn write_record(&mut self, id: RecordId, offset: u32, dst: &mut [u8]) {
        dst.fill((id as u32 ^ offset) as u8);
    }
}

fn cfg() -> Config {
    Config {
        recv_buffer: 64 << 20,
        send_buffer: 64 << 20,
        window_scale: Some(10),
        initial_window: 100_000,
        // Room to hold a whole flight out of order (the SACK case; no other case has holes).
        max_ooo_bytes: 64 << 20,
        ..Config::default()
    }
}

/// An established pair (a active, b passive), all handshake packets exchanged; a is in record
/// mode with `BATCH` records of `SEG` octets queued, b in record mode too when `b_records`.
pub fn pair(t0: Timestamp, b_records: bool) -> (Connection, Connection) {
    let g = IsnGenerator::new([3; 16], t0);
    let ta = FourTuple {
        local: "198.18.0.1:40000".parse().unwrap(),
        remote: "198.18.0.2:5000".parse().unwrap(),
    };
    let mut a = Connection::connect(cfg(), ta, &g, t0).expect("valid TCP settings");
    let mut b = Connection::listen(cfg(), ta.remote, &g, t0).expect("valid TCP settings");
    netsim::exchange(&mut a, &mut b, t0, 4);
    assert_eq!(
        (a.state(), b.state()),
        (State::Established, State::Established)
    );
    a.enter_record_mode();
    for id in 0..BATCH {
        a.send_record(SEG as u32, id as u64).unwrap();
    }
    if b_records {
        b.enter_record_mode();
    }
    (a, b)
}

/// Packets back to back in one reusable buffer (no allocation per packet in the timed loops).
#[derive(Default)]
pub struct Arena {
    data: Vec<u8>,
    ends: Vec<usize>,
}

impl Arena {
    /// Room for a batch of full-size packets (no allocation while timed).
    pub fn with_capacity() -> Self {
        Arena {
            data: Vec::with_capacity(BATCH * 1600),
            ends: Vec::with_capacity(BATCH),
        }
    }
    pub fn push(&mut self, p: &[u8]) {
        self.data.extend_from_slice(p);
        self.ends.push(self.data.len());
    }
    pub fn clear(&mut self) {
        self.data.clear();
        self.ends.clear();
    }
    pub fn len(&self) -> usize {
        self.ends.len()
    }
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(self.ends.iter().copied())
            .map(|(a, b)| &self.data[a..b])
    }
}
