//! ONC RPC authentication (RFC 5531 §8.2, §9, Appendix A): `opaque_auth`, AUTH_NONE and AUTH_SYS.

use crate::xdr::{padded_len, XdrError, XdrReader, XdrWriter};

/// AUTH_NONE flavor.
pub const AUTH_NONE: u32 = 0;
/// AUTH_SYS (AUTH_UNIX) flavor.
pub const AUTH_SYS: u32 = 1;
/// Largest `opaque_auth` body (RFC 5531: `opaque body<400>`).
pub const MAX_AUTH_BODY: u32 = 400;
/// Largest AUTH_SYS machine name (`string machinename<255>`).
pub const MAX_MACHINE_NAME: u32 = 255;
/// Most AUTH_SYS supplementary groups (`unsigned int gids<16>`).
pub const MAX_GIDS: u32 = 16;

/// `opaque_auth`: a flavor and an opaque body of at most 400 bytes, borrowed from the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OpaqueAuth<'a> {
    /// The flavor (AUTH_NONE, AUTH_SYS, ...).
    pub flavor: u32,
    /// The body, uninterpreted.
    pub body: &'a [u8],
}

impl<'a> OpaqueAuth<'a> {
    /// AUTH_NONE with an empty body.
    pub const NONE: OpaqueAuth<'static> = OpaqueAuth {
        flavor: AUTH_NONE,
        body: &[],
    };

    /// Encoded length in bytes.
    pub fn buffer_len(&self) -> usize {
        8 + padded_len(self.body.len())
    }

    /// Decodes flavor and body (at most [`MAX_AUTH_BODY`] bytes).
    pub fn decode(r: &mut XdrReader<'a>) -> Result<Self, XdrError> {
        Ok(Self {
            flavor: r.u32()?,
            body: r.opaque(MAX_AUTH_BODY)?,
        })
    }

    /// Encodes flavor and body; a body over 400 bytes is [`XdrError::TooLong`].
    pub fn encode(&self, w: &mut XdrWriter<'_>) -> Result<(), XdrError> {
        if self.body.len() > MAX_AUTH_BODY as usize {
            return Err(XdrError::TooLong);
        }
        w.u32(self.flavor)?;
        w.opaque(self.body)
    }
}

/// AUTH_SYS credentials (`authsys_parms`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AuthSys<'a> {
    /// Arbitrary ID the caller generates.
    pub stamp: u32,
    /// Name of the caller's machine (at most 255 bytes).
    pub machine_name: &'a [u8],
    /// Effective user ID.
    pub uid: u32,
    /// Effective group ID.
    pub gid: u32,
    /// Supplementary groups (at most 16).
    pub gids: Vec<u32>,
}

impl<'a> AuthSys<'a> {
    /// Decodes an AUTH_SYS body (the `body` of an `opaque_auth` with flavor AUTH_SYS).
    pub fn decode(body: &'a [u8]) -> Result<Self, XdrError> {
        let mut r = XdrReader::new(body);
        Ok(Self {
            stamp: r.u32()?,
            machine_name: r.opaque(MAX_MACHINE_NAME)?,
            uid: r.u32()?,
            gid: r.u32()?,
            gids: r.array(MAX_GIDS, 4, |r| r.u32())?,
        })
    }

    /// Encoded length of the body in bytes.
    pub fn buffer_len(&self) -> usize {
        4 + 4 + padded_len(self.machine_name.len()) + 8 + 4 + 4 * self.gids.len()
    }

    /// Encodes the body into `w` (the caller wraps it as an `opaque_auth`).
    pub fn encode(&self, w: &mut XdrWriter<'_>) -> Result<(), XdrError> {
        if self.machine_name.len() > MAX_MACHINE_NAME as usize
            || self.gids.len() > MAX_GIDS as usize
        {
            return Err(XdrError::TooLong);
        }
        w.u32(self.stamp)?;
        w.opaque(self.machine_name)?;
        w.u32(self.uid)?;
        w.u32(self.gid)?;
        w.array(&self.gids, |w, g| w.u32(*g))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xdr::encode_to_vec;

    #[test]
    fn auth_none_is_two_zero_words() {
        let v = encode_to_vec(16, |w| OpaqueAuth::NONE.encode(w)).unwrap();
        assert_eq!(v, [0u8; 8]);
        assert_eq!(OpaqueAuth::NONE.buffer_len(), 8);
    }

    #[test]
    fn auth_sys_roundtrip_and_bounds() {
        let a = AuthSys {
            stamp: 0x1234,
            machine_name: b"node1",
            uid: 1000,
            gid: 100,
            gids: vec![4, 24, 27],
        };
        let body = encode_to_vec(512, |w| a.encode(w)).unwrap();
        assert_eq!(body.len(), a.buffer_len());
        assert_eq!(AuthSys::decode(&body), Ok(a.clone()));
        let auth = OpaqueAuth {
            flavor: AUTH_SYS,
            body: &body,
        };
        let v = encode_to_vec(512, |w| auth.encode(w)).unwrap();
        assert_eq!(OpaqueAuth::decode(&mut XdrReader::new(&v)), Ok(auth));
        let too_many = AuthSys {
            gids: vec![0; 17],
            ..a
        };
        assert_eq!(
            encode_to_vec(512, |w| too_many.encode(w)),
            Err(XdrError::TooLong)
        );
        let big = [0u8; 401];
        let over = OpaqueAuth {
            flavor: AUTH_SYS,
            body: &big,
        };
        assert_eq!(
            encode_to_vec(1024, |w| over.encode(w)),
            Err(XdrError::TooLong)
        );
    }
}
