//! The kernel transport's queue pair: the application posts and closes while the connection
//! driver frames, sees the acknowledgement, and fails the stream; a real `ddp::Qp` in Full
//! Operation behind the shared state, nothing on a socket.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use ddp::{PdId, QpConfig, RdmapConfig, StreamId};
use loom::thread;

use super::explore;
use crate::pd::StagSeeds;
use crate::queue_pair::{Established, QpKind, QpShared};
use crate::{
    Access, Completion, CompletionQueue, Opcode, PostError, ProtectionDomain, QpError, QueuePair,
    Status,
};

/// What MPA agreed on for the model's stream (CRC, no markers).
fn negotiated() -> mpa::Negotiated {
    mpa::Negotiated {
        role: mpa::Role::Initiator,
        tx_markers: false,
        rx_markers: false,
        crc: true,
        revision: 1,
        read_depths: mpa::ReadDepths::default(),
        peer_read_depths: None,
        rtr: None,
        peer_private_data: Vec::new(),
        local_frame_len: 20,
        peer_frame_len: 20,
    }
}

/// A queue pair in Full Operation over `pd`, completing on `cq` (both queues), as
/// `device::prepare_queue_pair` makes one, and the application's handle on it.
fn queue_pair(pd: &ProtectionDomain, cq: &CompletionQueue) -> (Arc<QpShared>, QueuePair) {
    let pd_id: PdId = pd.inner.id;
    let cfg = QpConfig {
        engine: RdmapConfig {
            stream: StreamId(1),
            pd: pd_id,
            ..RdmapConfig::default()
        },
        auto_accept: false,
        ..QpConfig::default()
    };
    let mut qp = ddp::Qp::new_established(cfg, &negotiated());
    while qp.poll_event().is_some() {}
    let up = Established {
        peer_private_data: Vec::new(),
        negotiated: qp.negotiated().unwrap(),
    };
    let shared = Arc::new(QpShared::new(1, qp, pd.clone(), cq.clone(), cq.clone()).unwrap());
    (shared.clone(), QueuePair::kernel(shared, up))
}

/// One round of the driver as `Driver::pump` runs it: the close seen, what is queued framed.
fn driver_round(shared: &QpShared, started_close: &mut bool) {
    shared.locked(|qp| {
        if shared.close_requested.load(Ordering::Acquire) && !*started_close {
            *started_close = true;
            qp.shutdown();
        }
        let st = shared.pd().lock();
        let mut out = vec![0u8; 4096];
        qp.poll_transmit_batch(&st.tags, &st.mem, &mut out);
    });
}

/// The application posts two Sends and a receive, closes the queue pair, and tries one more
/// Send; meanwhile the driver runs a round (the close seen, the Sends framed), TCP takes
/// every octet framed (`on_acked`, as `flush_tx` reports it, without delivering), and the
/// stream fails (the peer reset it): the driver's last step fails ddp's queue pair, then marks
/// it finished.
///
/// Every post accepted completes exactly once, successfully or flushed, and nothing else
/// reaches the completion queue; the Sends complete in posting order; the post after the
/// close is refused; the work tracker forgets every request; the application sees the
/// stream's error and that the queue pair is down.
#[test]
fn posts_race_the_close_and_the_failure() {
    explore(
        "queue pair: post and close racing completion and failure",
        || {
            let pd = ProtectionDomain::new(1, &StagSeeds::fixed_for_tests(1));
            let mr = pd.register(64, Access::LOCAL_WRITE).unwrap();
            let cq = CompletionQueue::new(1, 16);
            let (shared, app) = queue_pair(&pd, &cq);
            // A second handle on the same queue pair that outlives the close (as a detached
            // handle does): what the application can still call afterwards.
            let after = QueuePair {
                kind: QpKind::Kernel(shared.clone()),
                peer_private_data: Vec::new(),
                negotiated: app.negotiated(),
                detached: true,
            };

            let driver = {
                let shared = shared.clone();
                thread::spawn(move || {
                    let mut started_close = false;
                    driver_round(&shared, &mut started_close);
                    {
                        let mut qp = shared.lock_qp();
                        let framed = qp.tx_offset();
                        qp.on_acked(framed);
                    }
                    shared.set_error(QpError::Io(std::io::ErrorKind::ConnectionReset));
                    shared.locked(|qp| qp.handle_close());
                    shared.set_finished();
                })
            };

            let mut accepted = Vec::new();
            for (wr_id, r) in [
                (1, app.post_send(1, &mr, 0..8)),
                (2, app.post_send(2, &mr, 8..16)),
                (3, app.post_recv(3, &mr, 16..24)),
            ] {
                match r {
                    Ok(()) => accepted.push(wr_id),
                    Err(e) => assert_eq!(e, PostError::NotConnected),
                }
            }
            app.close();
            assert_eq!(
                after.post_send(4, &mr, 24..32),
                Err(PostError::NotConnected),
                "a post accepted after the close"
            );
            driver.join().unwrap();

            let mut got: Vec<Completion> = Vec::new();
            cq.poll(&mut got, 16);
            let mut ids: Vec<u64> = got.iter().map(|c| c.wr_id).collect();
            let sends: Vec<u64> = got
                .iter()
                .filter(|c| c.opcode == Opcode::Send)
                .map(|c| c.wr_id)
                .collect();
            assert!(
                sends.windows(2).all(|w| w[0] < w[1]),
                "Sends completed out of posting order: {got:?}"
            );
            assert!(
                got.iter()
                    .all(|c| matches!(c.status, Status::Success | Status::Flushed)),
                "{got:?}"
            );
            ids.sort_unstable();
            assert_eq!(
                ids, accepted,
                "each accepted post completes exactly once: {got:?}"
            );
            assert_eq!(
                shared.work.in_flight(),
                0,
                "the work tracker kept a request"
            );
            assert_eq!(
                after.error(),
                Some(QpError::Io(std::io::ErrorKind::ConnectionReset))
            );
            assert!(!after.is_connected());
        },
    );
}
