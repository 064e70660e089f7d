//! The hook's way to the daemon: one HTTP/1.1 request on a fresh connection to the address
//! the daemon recorded (`.memfold/serve.json`), with a deadline. A hook answers within its
//! agent's budget, so anything slower than the deadline counts as "the daemon is down".

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A running daemon: where it listens, the token it wants, and the path prefix of the space
/// (`/spaces/<name>` with a home's operator token, empty for a root).
#[derive(Debug, Clone)]
pub struct Daemon {
    pub addr: SocketAddr,
    pub token: Option<String>,
    pub prefix: String,
}

impl Daemon {
    /// `METHOD prefix+path` with an optional JSON body; the status and the JSON answer.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        deadline: Duration,
    ) -> Result<(u16, Value), String> {
        let started = Instant::now();
        let left = || deadline.saturating_sub(started.elapsed()).max(Duration::from_millis(1));
        let mut stream =
            TcpStream::connect_timeout(&self.addr, left()).map_err(|e| format!("connecting to {}: {e}", self.addr))?;
        stream.set_nodelay(true).ok();
        let body = body.map(|b| serde_json::to_vec(b).expect("JSON serialises")).unwrap_or_default();
        let mut head = format!(
            "{method} {}{path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nAccept: application/json\r\nContent-Length: {}\r\n",
            self.prefix,
            self.addr,
            body.len()
        );
        if !body.is_empty() {
            head.push_str("Content-Type: application/json\r\n");
        }
        if let Some(token) = &self.token {
            head.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        head.push_str("\r\n");
        stream.set_write_timeout(Some(left())).ok();
        stream
            .write_all(head.as_bytes())
            .and_then(|()| stream.write_all(&body))
            .map_err(|e| format!("sending: {e}"))?;
        let mut answer = Vec::new();
        let mut chunk = [0u8; 16 << 10];
        loop {
            stream.set_read_timeout(Some(left())).ok();
            if started.elapsed() >= deadline {
                return Err(format!("no answer within {} ms", deadline.as_millis()));
            }
            match stream.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => answer.extend_from_slice(&chunk[..n]),
                Err(e) => return Err(format!("reading the answer: {e}")),
            }
        }
        parse(&answer)
    }
}

/// Status and JSON body of an HTTP/1.1 answer (sized or chunked).
fn parse(answer: &[u8]) -> Result<(u16, Value), String> {
    let split = answer.windows(4).position(|w| w == b"\r\n\r\n").ok_or("the answer has no end of head")?;
    let head = String::from_utf8_lossy(&answer[..split]);
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("not an HTTP answer: {:?}", head.lines().next().unwrap_or_default()))?;
    let mut body = answer[split + 4..].to_vec();
    if head
        .lines()
        .any(|l| l.to_ascii_lowercase().starts_with("transfer-encoding:") && l.to_ascii_lowercase().contains("chunked"))
    {
        body = unchunk(&body)?;
    }
    let value = if body.is_empty() { Value::Null } else { serde_json::from_slice(&body).unwrap_or(Value::Null) };
    Ok((status, value))
}

fn unchunk(mut body: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let end = body.windows(2).position(|w| w == b"\r\n").ok_or("a chunk has no size line")?;
        let size =
            usize::from_str_radix(String::from_utf8_lossy(&body[..end]).split(';').next().unwrap_or("").trim(), 16)
                .map_err(|e| format!("a chunk size: {e}"))?;
        body = &body[end + 2..];
        if size == 0 {
            return Ok(out);
        }
        out.extend_from_slice(body.get(..size).ok_or("a chunk is cut short")?);
        body = body.get(size + 2..).unwrap_or_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sized_and_chunked_answers_parse() {
        let sized = b"HTTP/1.1 200 OK\r\ncontent-length: 11\r\n\r\n{\"hits\":[]}";
        assert_eq!(parse(sized).unwrap(), (200, serde_json::json!({"hits": []})));
        let chunked =
            b"HTTP/1.1 202 Accepted\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n3\r\n 1}\r\n0\r\n\r\n";
        assert_eq!(parse(chunked).unwrap(), (202, serde_json::json!({"a": 1})));
        assert!(parse(b"garbage").is_err());
    }
}
