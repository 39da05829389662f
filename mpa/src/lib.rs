//! MPA framing (draft-ietf-rddp-mpa-01 / RFC 5044), sans-IO.
#![forbid(unsafe_code)]
