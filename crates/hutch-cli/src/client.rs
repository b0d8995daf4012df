//! A small HTTP/1 client for the daemon's API, over its Unix socket or TCP. One connection per
//! request: a CLI invocation makes a handful of calls and exits. Streaming endpoints (Server-Sent
//! Events) are read as they arrive with [`EventStream`].
use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HOST, USER_AGENT};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpStream, UnixStream};

/// How long a TCP connect may take before the daemon counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the daemon listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// The daemon's Unix socket.
    Unix(PathBuf),
    /// `host:port` of its TCP listener (plain HTTP).
    Tcp(String),
}

impl Endpoint {
    /// Parses `unix:///path/to.sock`, an absolute socket path, or `http://host[:port]`.
    pub fn parse(url: &str) -> Result<Self, ClientError> {
        let bad = |why: &str| ClientError::BadUrl { url: url.to_string(), why: why.to_string() };
        if let Some(path) = url.strip_prefix("unix://") {
            if !path.starts_with('/') {
                return Err(bad(
                    "a Unix socket URL needs an absolute path, e.g. unix:///run/hutch/hutch.sock",
                ));
            }
            return Ok(Endpoint::Unix(PathBuf::from(path)));
        }
        if url.starts_with('/') {
            return Ok(Endpoint::Unix(PathBuf::from(url)));
        }
        if url.starts_with("https://") {
            return Err(bad("the CLI speaks plain HTTP; put TLS in front of the daemon with a proxy and reach the proxy's plain side, or use the Unix socket"));
        }
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| bad("use unix:///PATH or http://HOST:PORT"))?;
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        if !path.is_empty() {
            return Err(bad("the daemon's API is at the root: leave out the path"));
        }
        if authority.is_empty() || authority.contains('@') {
            return Err(bad("use http://HOST:PORT"));
        }
        let has_port = match authority.rfind(']') {
            Some(i) => authority[i..].contains(':'),
            None => authority.contains(':'),
        };
        Ok(Endpoint::Tcp(if has_port { authority.to_string() } else { format!("{authority}:80") }))
    }

    /// The `hutch serve` invocation that would listen here.
    pub fn serve_hint(&self, default_socket: &str) -> String {
        match self {
            Endpoint::Unix(p) if p.as_os_str() == default_socket => "hutch serve".into(),
            Endpoint::Unix(p) => format!("hutch serve --socket {}", p.display()),
            Endpoint::Tcp(a) => format!("hutch serve --tcp {a}"),
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Unix(p) => write!(f, "{}", p.display()),
            Endpoint::Tcp(a) => write!(f, "http://{a}"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("invalid daemon URL {url:?}: {why}")]
    BadUrl { url: String, why: String },
    /// Nothing accepted the connection: the daemon is not running, or the address is wrong.
    #[error("cannot reach the hutch daemon at {endpoint}")]
    Unreachable {
        endpoint: Endpoint,
        #[source]
        source: io::Error,
    },
    /// The connection broke during the request.
    #[error("lost the connection to the hutch daemon at {endpoint}")]
    Connection {
        endpoint: Endpoint,
        #[source]
        source: hyper::Error,
    },
    /// The API answered with an error body `{code, message}`.
    #[error("{message} ({code})")]
    Api { status: StatusCode, code: String, message: String },
    /// The daemon answered something this CLI does not understand.
    #[error("unexpected answer from the daemon: {0}")]
    Protocol(String),
}

impl ClientError {
    /// Turns a non-success response into [`ClientError::Api`].
    pub fn from_response(status: StatusCode, body: &[u8]) -> Self {
        #[derive(serde::Deserialize)]
        struct ErrorBody {
            code: String,
            message: String,
        }
        match serde_json::from_slice::<ErrorBody>(body) {
            Ok(e) => ClientError::Api { status, code: e.code, message: e.message },
            Err(_) => {
                let text = String::from_utf8_lossy(body);
                let text = text.trim();
                ClientError::Api {
                    status,
                    code: format!("http_{}", status.as_u16()),
                    message: if text.is_empty() || text.len() > 200 {
                        format!(
                            "the daemon answered {}",
                            status.canonical_reason().unwrap_or("an error")
                        )
                    } else {
                        text.to_string()
                    },
                }
            }
        }
    }
}

/// Keeps a 2xx response's body and turns any other into an error.
pub fn success((status, body): (StatusCode, Bytes)) -> Result<Bytes, ClientError> {
    if status.is_success() {
        Ok(body)
    } else {
        Err(ClientError::from_response(status, &body))
    }
}

/// Percent-encodes everything but the unreserved characters, for a path segment or a query
/// value.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The daemon's API, reached at one endpoint, optionally with an API key.
#[derive(Debug, Clone)]
pub struct Client {
    endpoint: Endpoint,
    api_key: Option<String>,
}

impl Client {
    pub fn new(endpoint: Endpoint, api_key: Option<String>) -> Self {
        Self { endpoint, api_key }
    }

    pub async fn get(&self, path: &str) -> Result<(StatusCode, Bytes), ClientError> {
        self.call(Method::GET, path, None).await
    }

    pub async fn post_json(
        &self,
        path: &str,
        body: &Value,
    ) -> Result<(StatusCode, Bytes), ClientError> {
        self.call(Method::POST, path, Some(("application/json", body.to_string().into()))).await
    }

    pub async fn put_bytes(
        &self,
        path: &str,
        data: Vec<u8>,
    ) -> Result<(StatusCode, Bytes), ClientError> {
        self.call(Method::PUT, path, Some(("application/octet-stream", data.into()))).await
    }

    pub async fn delete(&self, path: &str) -> Result<(StatusCode, Bytes), ClientError> {
        self.call(Method::DELETE, path, None).await
    }

    /// Opens a Server-Sent Events stream (`GET` when `body` is `None`, else `POST` of JSON).
    /// An error status is read whole and returned as [`ClientError::Api`].
    pub async fn events(
        &self,
        path: &str,
        body: Option<&Value>,
    ) -> Result<EventStream, ClientError> {
        let (method, body) = match body {
            Some(b) => (Method::POST, Some(("application/json", Bytes::from(b.to_string())))),
            None => (Method::GET, None),
        };
        let resp = self.send(method, path, body, "text/event-stream").await?;
        let status = resp.status();
        if !status.is_success() {
            let body = self.collect(resp.into_body()).await?;
            return Err(ClientError::from_response(status, &body));
        }
        Ok(EventStream {
            body: resp.into_body(),
            parser: SseParser::default(),
            ready: VecDeque::new(),
            endpoint: self.endpoint.clone(),
        })
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<(&'static str, Bytes)>,
    ) -> Result<(StatusCode, Bytes), ClientError> {
        let resp = self.send(method, path, body, "application/json").await?;
        let status = resp.status();
        Ok((status, self.collect(resp.into_body()).await?))
    }

    async fn collect(&self, body: Incoming) -> Result<Bytes, ClientError> {
        body.collect()
            .await
            .map(|c| c.to_bytes())
            .map_err(|source| ClientError::Connection { endpoint: self.endpoint.clone(), source })
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<(&'static str, Bytes)>,
        accept: &str,
    ) -> Result<hyper::Response<Incoming>, ClientError> {
        let unreachable = |source: io::Error| ClientError::Unreachable {
            endpoint: self.endpoint.clone(),
            source,
        };
        let (mut sender, host) = match &self.endpoint {
            Endpoint::Unix(p) => {
                let s = UnixStream::connect(p).await.map_err(unreachable)?;
                (self.handshake(s).await?, "localhost".to_string())
            }
            Endpoint::Tcp(addr) => {
                let s = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr.as_str()))
                    .await
                    .map_err(|_| unreachable(io::ErrorKind::TimedOut.into()))?
                    .map_err(unreachable)?;
                let _ = s.set_nodelay(true);
                (self.handshake(s).await?, addr.clone())
            }
        };
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(HOST, host)
            .header(USER_AGENT, concat!("hutch-cli/", env!("CARGO_PKG_VERSION")))
            .header(ACCEPT, accept);
        if let Some(key) = &self.api_key {
            req = req.header(AUTHORIZATION, format!("Bearer {key}"));
        }
        let req = match body {
            Some((content_type, data)) => {
                req.header(CONTENT_TYPE, content_type).body(Full::new(data))
            }
            None => req.body(Full::new(Bytes::new())),
        }
        .map_err(|e| ClientError::Protocol(format!("cannot build the request for {path}: {e}")))?;
        sender
            .send_request(req)
            .await
            .map_err(|source| ClientError::Connection { endpoint: self.endpoint.clone(), source })
    }

    async fn handshake<T>(&self, stream: T) -> Result<SendRequest<Full<Bytes>>, ClientError>
    where
        T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (sender, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(
                |source| ClientError::Connection { endpoint: self.endpoint.clone(), source },
            )?;
        // drives the connection; it ends when the response body is read and the sender dropped
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(sender)
    }
}

/// One Server-Sent Event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field (`message` when the server sent none).
    pub event: String,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
}

impl SseEvent {
    pub fn json(&self) -> Result<Value, ClientError> {
        serde_json::from_str(&self.data).map_err(|e| {
            ClientError::Protocol(format!("event {:?} carries invalid JSON: {e}", self.event))
        })
    }
}

/// The events of a streaming response, as they arrive.
pub struct EventStream {
    body: Incoming,
    parser: SseParser,
    ready: VecDeque<SseEvent>,
    endpoint: Endpoint,
}

impl EventStream {
    /// The next event, or `None` when the server ended the stream.
    pub async fn next(&mut self) -> Result<Option<SseEvent>, ClientError> {
        loop {
            if let Some(e) = self.ready.pop_front() {
                return Ok(Some(e));
            }
            match self.body.frame().await {
                // an event cut off by the end of the stream is dropped, as the SSE spec says
                None => return Ok(None),
                Some(Err(source)) => {
                    return Err(ClientError::Connection { endpoint: self.endpoint.clone(), source })
                }
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.ready.extend(self.parser.push(&data));
                    }
                }
            }
        }
    }
}

/// Incremental `text/event-stream` parser: feed it bytes in any chunking, get whole events.
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    event: String,
    data: String,
    has_data: bool,
}

impl SseParser {
    pub fn push(&mut self, mut chunk: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        while let Some(i) = chunk.iter().position(|&b| b == b'\n') {
            self.line.extend_from_slice(&chunk[..i]);
            chunk = &chunk[i + 1..];
            let mut line = std::mem::take(&mut self.line);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if let Some(e) = self.line_done(&String::from_utf8_lossy(&line)) {
                out.push(e);
            }
        }
        self.line.extend_from_slice(chunk);
        out
    }

    fn line_done(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            let event = std::mem::take(&mut self.event);
            let data = std::mem::take(&mut self.data);
            if !std::mem::take(&mut self.has_data) {
                return None;
            }
            let event = if event.is_empty() { "message".to_string() } else { event };
            return Some(SseEvent { event, data });
        }
        if line.starts_with(':') {
            // a comment: the server's keep-alive
            return None;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => self.event = value.to_string(),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        assert_eq!(
            Endpoint::parse("unix:///run/hutch/hutch.sock").ok(),
            Some(Endpoint::Unix("/run/hutch/hutch.sock".into()))
        );
        assert_eq!(Endpoint::parse("/tmp/h.sock").ok(), Some(Endpoint::Unix("/tmp/h.sock".into())));
        assert_eq!(
            Endpoint::parse("http://127.0.0.1:7070").ok(),
            Some(Endpoint::Tcp("127.0.0.1:7070".into()))
        );
        assert_eq!(
            Endpoint::parse("http://example.com/").ok(),
            Some(Endpoint::Tcp("example.com:80".into()))
        );
        assert_eq!(Endpoint::parse("http://[::1]").ok(), Some(Endpoint::Tcp("[::1]:80".into())));
        assert_eq!(
            Endpoint::parse("http://[::1]:7070").ok(),
            Some(Endpoint::Tcp("[::1]:7070".into()))
        );
        for bad in ["unix://relative.sock", "https://h:1", "h:7070", "http://", "http://h:1/api"] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
        let d = Endpoint::Unix("/run/hutch/hutch.sock".into());
        assert_eq!(d.serve_hint("/run/hutch/hutch.sock"), "hutch serve");
        assert_eq!(
            Endpoint::Unix("/tmp/x.sock".into()).serve_hint("/run/hutch/hutch.sock"),
            "hutch serve --socket /tmp/x.sock"
        );
    }

    #[test]
    fn sse_events_across_chunk_boundaries() {
        let stream = b": keep-alive\n\nevent: stdout\ndata: {\"data\":\"a\"}\n\nevent: exit\r\ndata: 1\r\ndata: 2\r\n\r\ndata: plain\n\n";
        let expected = vec![
            SseEvent { event: "stdout".into(), data: "{\"data\":\"a\"}".into() },
            SseEvent { event: "exit".into(), data: "1\n2".into() },
            SseEvent { event: "message".into(), data: "plain".into() },
        ];
        for split in 0..stream.len() {
            let mut p = SseParser::default();
            let mut got = p.push(&stream[..split]);
            got.extend(p.push(&stream[split..]));
            assert_eq!(got, expected, "split at {split}");
        }
        // byte by byte
        let mut p = SseParser::default();
        let got: Vec<_> = stream.iter().flat_map(|b| p.push(std::slice::from_ref(b))).collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn error_bodies() {
        let e = ClientError::from_response(
            StatusCode::NOT_FOUND,
            br#"{"code":"not_found","message":"no sandbox x"}"#,
        );
        assert_eq!(e.to_string(), "no sandbox x (not_found)");
        let e = ClientError::from_response(StatusCode::BAD_GATEWAY, b"");
        assert_eq!(e.to_string(), "the daemon answered Bad Gateway (http_502)");
    }

    #[test]
    fn percent_encoding() {
        assert_eq!(encode("/workspace/a b+c.txt"), "%2Fworkspace%2Fa%20b%2Bc.txt");
        assert_eq!(encode("team:a,x"), "team%3Aa%2Cx");
    }
}
