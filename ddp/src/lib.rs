//! DDP (draft-ietf-rddp-ddp-06) and RDMAP (RFC 5040), sans-IO.
#![forbid(unsafe_code)]
