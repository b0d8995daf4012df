//! The proxy workload's upstream: fetched by the gateway (handlers have no network) over a
//! pooled HTTP/1.1 client.
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::GatewayError;

/// Largest upstream body the gateway takes.
const MAX_BODY: usize = 1 << 20;

pub struct Upstream {
    url: Option<hyper::Uri>,
    client: Client<HttpConnector, Empty<Bytes>>,
}

impl Upstream {
    pub fn new(url: Option<String>) -> Result<Self, GatewayError> {
        let url =
            match url {
                Some(u) => Some(u.parse::<hyper::Uri>().map_err(|e| {
                    GatewayError::Setup(format!("--upstream {u:?} is not a URL: {e}"))
                })?),
                None => None,
            };
        if let Some(u) = &url {
            if u.scheme_str() != Some("http") {
                return Err(GatewayError::Setup(format!(
                    "--upstream {u}: only http:// is supported"
                )));
            }
        }
        Ok(Self { url, client: Client::builder(TokioExecutor::new()).build_http() })
    }

    pub async fn fetch(&self) -> Result<Bytes, GatewayError> {
        let Some(url) = &self.url else {
            return Err(GatewayError::Unavailable(
                "no upstream configured (--upstream URL)".into(),
            ));
        };
        let resp = self
            .client
            .get(url.clone())
            .await
            .map_err(|e| GatewayError::Upstream(format!("{url}: {e}")))?;
        if !resp.status().is_success() {
            return Err(GatewayError::Upstream(format!("{url} answered {}", resp.status())));
        }
        let body = Limited::new(resp.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| GatewayError::Upstream(format!("{url}: {e}")))?;
        Ok(body.to_bytes())
    }
}
