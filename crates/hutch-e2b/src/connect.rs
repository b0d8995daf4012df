//! The Connect protocol with JSON messages, as the SDKs speak it: unary calls are plain JSON
//! bodies; streams are envelopes (`flags`, a big-endian u32 length, the JSON), ending with an
//! end-of-stream envelope (flag 0x02) that carries the error, if any.
use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::error::E2bError;

/// Flag of the end-of-stream envelope.
pub const END_STREAM: u8 = 0x02;
/// Largest envelope accepted from a client.
const MAX_ENVELOPE: usize = 16 << 20;

/// One envelope.
pub fn envelope(flags: u8, msg: &Value) -> Bytes {
    let body = serde_json::to_vec(msg).unwrap_or_else(|_| b"{}".to_vec());
    let mut out = Vec::with_capacity(5 + body.len());
    out.push(flags);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    Bytes::from(out)
}

/// The end-of-stream envelope, with the error that ended the stream.
pub fn end_stream(err: Option<Value>) -> Bytes {
    match err {
        Some(e) => envelope(END_STREAM, &json!({ "error": e })),
        None => envelope(END_STREAM, &json!({})),
    }
}

/// Splits envelopes out of a byte stream as it arrives.
#[derive(Debug, Default)]
pub struct Decoder {
    buf: Vec<u8>,
}

impl Decoder {
    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The next complete envelope: its flags and message.
    pub fn next_envelope(&mut self) -> Result<Option<(u8, Vec<u8>)>, E2bError> {
        if self.buf.len() < 5 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
        if len > MAX_ENVELOPE {
            return Err(E2bError::BadRequest(format!(
                "stream message of {len} bytes is too large"
            )));
        }
        if self.buf.len() < 5 + len {
            return Ok(None);
        }
        let flags = self.buf[0];
        let msg = self.buf[5..5 + len].to_vec();
        self.buf.drain(..5 + len);
        Ok(Some((flags, msg)))
    }
}

/// The request message of a server-streaming call (one envelope).
pub fn stream_request<T: DeserializeOwned>(body: &[u8]) -> Result<T, E2bError> {
    let mut d = Decoder::default();
    d.push(body);
    match d.next_envelope()? {
        Some((flags, msg)) if flags & 0x01 == 0 => parse(&msg),
        Some(_) => Err(E2bError::BadRequest("compressed messages are not supported".into())),
        None => Err(E2bError::BadRequest("the stream request has no complete message".into())),
    }
}

/// The request message of a unary call.
pub fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, E2bError> {
    let body = if body.iter().all(u8::is_ascii_whitespace) { &b"{}"[..] } else { body };
    serde_json::from_slice(body).map_err(|e| E2bError::BadRequest(format!("invalid message: {e}")))
}

/// The deadline the client set (`Connect-Timeout-Ms`).
pub fn timeout_ms(headers: &HeaderMap) -> Option<u64> {
    headers
        .get("connect-timeout-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
        .filter(|ms| *ms > 0)
}

/// How often to send a keepalive message on an idle stream (`Keepalive-Ping-Interval`, in
/// seconds; default 50).
pub fn keepalive(headers: &HeaderMap) -> std::time::Duration {
    let secs = headers
        .get("keepalive-ping-interval")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(50)
        .clamp(1, 3600);
    std::time::Duration::from_secs(secs)
}

/// A streaming response whose envelopes come from the returned sender, each flushed as sent.
pub fn stream() -> (mpsc::Sender<Bytes>, Response) {
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let body = Body::from_stream(tokio_stream::StreamExt::map(ReceiverStream::new(rx), |b| {
        Ok::<_, std::convert::Infallible>(b)
    }));
    let mut r = (StatusCode::OK, body).into_response();
    // exactly this value: the Python client compares it without normalizing
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/connect+json"));
    (tx, r)
}

/// A streaming call that fails before its first message: Connect sends the error in the
/// end-of-stream envelope of a 200 response (clients treat other statuses as transport errors).
pub fn stream_error(e: E2bError) -> Response {
    if let E2bError::SandboxGone(_) = e {
        return e.into_response();
    }
    let body = end_stream(Some(e.rpc_json()));
    let mut r = (StatusCode::OK, body).into_response();
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/connect+json"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_round_trip_split_anywhere() {
        let mut wire = envelope(0, &json!({"event": {"start": {"pid": 7}}})).to_vec();
        wire.extend_from_slice(&end_stream(None));
        for cut in 0..wire.len() {
            let mut d = Decoder::default();
            d.push(&wire[..cut]);
            let mut got = Vec::new();
            while let Some(e) = d.next_envelope().expect("decode") {
                got.push(e);
            }
            d.push(&wire[cut..]);
            while let Some(e) = d.next_envelope().expect("decode") {
                got.push(e);
            }
            assert_eq!(got.len(), 2);
            assert_eq!(got[0].0, 0);
            assert_eq!(got[1], (END_STREAM, b"{}".to_vec()));
        }
    }

    #[test]
    fn oversized_and_partial_messages_are_refused() {
        let mut d = Decoder::default();
        d.push(&[0, 0xff, 0xff, 0xff, 0xff]);
        assert!(d.next_envelope().is_err());
        assert!(stream_request::<Value>(&[0, 0, 0, 0, 9, b'{']).is_err());
    }

    #[test]
    fn deadline_header() {
        let mut h = HeaderMap::new();
        assert_eq!(timeout_ms(&h), None);
        h.insert("connect-timeout-ms", HeaderValue::from_static("60000"));
        assert_eq!(timeout_ms(&h), Some(60000));
    }
}
