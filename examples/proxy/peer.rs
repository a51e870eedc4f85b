//! A client connection's address, formatted once for all its requests.

use super::*;

/// Who is at the other end of a client connection: its address, and its IP
/// address as text (the access log's `client=`) and as the field value
/// `X-Forwarded-For` gets. Formatting an address costs more than the rest
/// of a log line; a keep-alive connection's requests share one.
#[derive(Debug)]
pub struct Peer {
    /// The client's socket address.
    pub addr: SocketAddr,
    /// Its IP address, as text.
    pub ip: HeaderValue,
}

impl Peer {
    /// `addr`, formatted.
    pub fn new(addr: SocketAddr) -> Peer {
        let ip = HeaderValue::from_str(&addr.ip().to_string())
            .expect("an IP address is a valid field value");
        Peer { addr, ip }
    }

    /// The IP address as text.
    pub fn ip_str(&self) -> &str {
        // Made from an address's text: visible ASCII.
        self.ip.to_str().unwrap_or("-")
    }
}
