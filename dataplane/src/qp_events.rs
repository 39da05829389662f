//! What both transports make of a queue pair's events: the verbs API's `QpError` and
//! `ConnectError`, and the device counters they move. One mapping, so the kernel and the xdp
//! transport report and count the same failure the same way.

use ddp::QpEvent;

use crate::counters::DeviceCounters;
use crate::queue_pair::QpError;
use crate::ConnectError;

/// A stream-ending queue-pair event as the verbs API reports it (`QueuePair::error`), counted
/// on the device; `None` for events that do not end the stream.
pub(crate) fn stream_error(c: &DeviceCounters, ev: &QpEvent) -> Option<QpError> {
    let fields = |t: &ddp::TerminateRepr| (t.code.layer as u8, t.code.etype, t.code.code);
    Some(match ev {
        QpEvent::FramingError(e) => {
            match e.code() {
                mpa::ErrorCode::CrcError => DeviceCounters::inc(&c.crc_errors),
                mpa::ErrorCode::MarkerError => DeviceCounters::inc(&c.marker_errors),
                _ => DeviceCounters::inc(&c.framing_errors),
            }
            QpError::Framing(e.code() as u8)
        }
        QpEvent::TerminateSent(t) => {
            DeviceCounters::inc(&c.terminates_sent);
            let (layer, etype, code) = fields(t);
            QpError::TerminateSent { layer, etype, code }
        }
        QpEvent::TerminateReceived(t) => {
            DeviceCounters::inc(&c.terminates_received);
            let (layer, etype, code) = fields(t);
            QpError::TerminateReceived { layer, etype, code }
        }
        QpEvent::MalformedTerminateReceived => {
            DeviceCounters::inc(&c.terminates_received);
            QpError::TerminateReceived {
                layer: 0xff,
                etype: 0xff,
                code: 0xff,
            }
        }
        QpEvent::TransportFailed => QpError::PeerClosed,
        _ => return None,
    })
}

/// Why MPA startup failed, as `connect` reports it; counted on the device.
pub(crate) fn startup_error(c: &DeviceCounters, ev: QpEvent) -> ConnectError {
    match ev {
        QpEvent::Rejected { private_data } => {
            DeviceCounters::inc(&c.startup_rejected);
            ConnectError::Rejected { private_data }
        }
        QpEvent::StartupFailed(e) => {
            match e {
                mpa::StartupError::Timeout => DeviceCounters::inc(&c.startup_timeouts),
                mpa::StartupError::ConnectionClosed => {}
                mpa::StartupError::InsufficientIrd { .. } | mpa::StartupError::NoMatchingRtr => {
                    DeviceCounters::inc(&c.startup_refused)
                }
                _ => DeviceCounters::inc(&c.startup_malformed),
            }
            ConnectError::Startup(e)
        }
        _ => ConnectError::Startup(mpa::StartupError::ConnectionClosed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_errors_map_and_count_once() {
        let c = DeviceCounters::default();
        let e = stream_error(&c, &QpEvent::FramingError(mpa::FramingError::CrcMismatch));
        assert_eq!(e, Some(QpError::Framing(mpa::ErrorCode::CrcError as u8)));
        assert_eq!(
            stream_error(&c, &QpEvent::TransportFailed),
            Some(QpError::PeerClosed)
        );
        let s = c.snapshot();
        assert_eq!((s.crc_errors, s.framing_errors, s.marker_errors), (1, 0, 0));
        let est = QpEvent::ConnectRequest(mpa::RequestInfo {
            private_data: vec![],
            peer_wants_markers: false,
            peer_wants_crc: true,
            revision: 2,
            peer_read_depths: None,
            p2p_offer: mpa::RtrTypes::NONE,
        });
        assert_eq!(stream_error(&c, &est), None, "not a stream error");
    }

    #[test]
    fn startup_failures_map_and_count() {
        let c = DeviceCounters::default();
        let r = startup_error(
            &c,
            QpEvent::Rejected {
                private_data: b"no".to_vec(),
            },
        );
        assert!(matches!(r, ConnectError::Rejected { private_data } if private_data == b"no"));
        let t = startup_error(&c, QpEvent::StartupFailed(mpa::StartupError::Timeout));
        assert!(matches!(
            t,
            ConnectError::Startup(mpa::StartupError::Timeout)
        ));
        let s = c.snapshot();
        assert_eq!((s.startup_rejected, s.startup_timeouts), (1, 1));
    }
}
