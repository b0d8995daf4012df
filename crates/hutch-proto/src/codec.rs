//! Frame codec: `u32 BE total | u32 BE header_len | header JSON | body bytes`.
//!
//! `total` counts everything after itself. The header is one JSON object (a [`crate::Request`]
//! or [`crate::Response`]); the body carries raw bytes (stdin, output chunks, file contents) so
//! binary data never goes through JSON.
use std::io::{self, Read, Write};

use serde::{de::DeserializeOwned, Serialize};

/// Largest JSON header accepted (1 MiB).
pub const MAX_HEADER: usize = 1024 * 1024;
/// Largest body accepted (8 MiB): file transfers are chunked below this.
pub const MAX_BODY: usize = 8 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("connection closed")]
    Closed,
    #[error("i/o error on the agent channel")]
    Io(#[from] io::Error),
    #[error("frame header of {0} bytes exceeds the {MAX_HEADER} byte limit")]
    HeaderTooLarge(usize),
    #[error("frame body of {0} bytes exceeds the {MAX_BODY} byte limit")]
    BodyTooLarge(usize),
    #[error("malformed frame: {0}")]
    Malformed(&'static str),
    #[error("malformed frame header")]
    Json(#[from] serde_json::Error),
}

/// One decoded frame: a typed header plus its raw body.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame<T> {
    pub header: T,
    pub body: Vec<u8>,
}

/// Encodes a frame into one buffer (one `write` call on the socket).
pub fn encode_frame<T: Serialize>(header: &T, body: &[u8]) -> Result<Vec<u8>, CodecError> {
    let json = serde_json::to_vec(header)?;
    if json.len() > MAX_HEADER {
        return Err(CodecError::HeaderTooLarge(json.len()));
    }
    if body.len() > MAX_BODY {
        return Err(CodecError::BodyTooLarge(body.len()));
    }
    let total = 4 + json.len() + body.len();
    let mut out = Vec::with_capacity(4 + total);
    out.extend_from_slice(&(total as u32).to_be_bytes());
    out.extend_from_slice(&(json.len() as u32).to_be_bytes());
    out.extend_from_slice(&json);
    out.extend_from_slice(body);
    Ok(out)
}

/// Checks a frame's length prefix; returns the number of bytes that follow it.
pub fn check_total(prefix: [u8; 4]) -> Result<usize, CodecError> {
    let total = u32::from_be_bytes(prefix) as usize;
    if total < 4 {
        return Err(CodecError::Malformed("length shorter than the header length field"));
    }
    if total > 4 + MAX_HEADER + MAX_BODY {
        return Err(CodecError::BodyTooLarge(total));
    }
    Ok(total)
}

/// Decodes the bytes that follow the length prefix.
pub fn decode_frame<T: DeserializeOwned>(mut rest: Vec<u8>) -> Result<Frame<T>, CodecError> {
    if rest.len() < 4 {
        return Err(CodecError::Malformed("missing header length"));
    }
    let hlen = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
    if hlen > MAX_HEADER {
        return Err(CodecError::HeaderTooLarge(hlen));
    }
    if 4 + hlen > rest.len() {
        return Err(CodecError::Malformed("header length beyond the frame"));
    }
    let header = serde_json::from_slice(&rest[4..4 + hlen])?;
    let body = rest.split_off(4 + hlen);
    if body.len() > MAX_BODY {
        return Err(CodecError::BodyTooLarge(body.len()));
    }
    Ok(Frame { header, body })
}

/// Reads one frame from a blocking reader. A clean EOF before a frame starts is [`CodecError::Closed`].
pub fn read_frame<T: DeserializeOwned, R: Read>(r: &mut R) -> Result<Frame<T>, CodecError> {
    let mut prefix = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut prefix[got..]) {
            Ok(0) if got == 0 => return Err(CodecError::Closed),
            Ok(0) => return Err(CodecError::Malformed("eof inside the length prefix")),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    let total = check_total(prefix)?;
    let mut rest = vec![0u8; total];
    r.read_exact(&mut rest).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => CodecError::Malformed("eof inside a frame"),
        _ => CodecError::Io(e),
    })?;
    decode_frame(rest)
}

/// Writes one frame to a blocking writer.
pub fn write_frame<T: Serialize, W: Write>(
    w: &mut W,
    header: &T,
    body: &[u8],
) -> Result<(), CodecError> {
    let buf = encode_frame(header, body)?;
    w.write_all(&buf)?;
    w.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Request, Response};

    #[test]
    fn round_trip_with_binary_body() {
        let body: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
        let buf = encode_frame(&Request::Stdin { id: 7 }, &body).expect("encode");
        let mut cur = std::io::Cursor::new(buf);
        let f: Frame<Request> = read_frame(&mut cur).expect("decode");
        assert_eq!(f.header, Request::Stdin { id: 7 });
        assert_eq!(f.body, body);
        assert!(matches!(read_frame::<Request, _>(&mut cur), Err(CodecError::Closed)));
    }

    #[test]
    fn rejects_oversized_and_truncated_frames() {
        let huge = ((4 + MAX_HEADER + MAX_BODY + 1) as u32).to_be_bytes();
        assert!(matches!(check_total(huge), Err(CodecError::BodyTooLarge(_))));
        assert!(matches!(check_total(2u32.to_be_bytes()), Err(CodecError::Malformed(_))));
        let mut buf = encode_frame(&Response::Ok { id: 1 }, b"").expect("encode");
        buf.truncate(buf.len() - 2);
        let mut cur = std::io::Cursor::new(buf);
        assert!(matches!(read_frame::<Response, _>(&mut cur), Err(CodecError::Malformed(_))));
        // header length pointing past the end of the frame
        let bad = [0, 0, 0, 8, 0, 0, 0, 200, b'{', b'}', 0, 0];
        let mut cur = std::io::Cursor::new(bad.to_vec());
        assert!(matches!(read_frame::<Response, _>(&mut cur), Err(CodecError::Malformed(_))));
    }
}
