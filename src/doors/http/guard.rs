//! Which HTTP requests may reach the API: a Host allowlist, and no request a browser marks as cross-site.
//!
//! Any web page the user opens can send requests to `127.0.0.1`. Two checks keep such pages
//! out, on every route and whether or not a bearer token is configured:
//!
//! - **Host.** A DNS-rebinding page reaches the daemon under its own name (a hostname that
//!   resolves to 127.0.0.1), and the browser sends that name as `Host`. Only
//!   `127.0.0.1:PORT`, `localhost:PORT`, `[::1]:PORT`, the configured bind address and the
//!   listening address (on the port actually bound), and the names in
//!   `server.allowed_hosts` are answered.
//! - **Browser headers.** Browsers mark every request with `Origin` (requests other than
//!   plain GETs) and `Sec-Fetch-Site`. A request whose `Origin` is not the server's own
//!   origin, or whose `Sec-Fetch-Site` is not `same-origin`, is refused; a read (GET or HEAD)
//!   may also say `Sec-Fetch-Site: none` (an address typed into the browser). Requests
//!   without these headers (curl, the CLI, agents, MCP clients) are not from a web page and
//!   pass.
//!
//! The checks are pure functions of the request head; [`super`] runs them before routing.

use std::net::SocketAddr;

use axum::http::{HeaderMap, Method, Uri, header};

use memfold_store::config::Authority;

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    #[error(
        "the request has no usable Host header; memfold answers only to {allowed} and the names in server.allowed_hosts"
    )]
    NoHost { allowed: String },
    #[error(
        "host {host} is not allowed: memfold answers only to {allowed} and the names in server.allowed_hosts \
         (a web page reaching it through DNS rebinding sends its own name)"
    )]
    ForeignHost { host: String, allowed: String },
    #[error(
        "refused a request sent by the web page at {origin}: pages of other sites may not use the memfold API \
         (clients that are not browsers send no Origin header)"
    )]
    CrossOrigin { origin: String },
    #[error(
        "refused a request the browser marked Sec-Fetch-Site: {site}: only same-origin requests may use the memfold API \
         (clients that are not browsers send no Sec-Fetch-Site header)"
    )]
    CrossSite { site: String },
}

impl Refusal {
    /// Whether the refusal is about the Host (421) rather than a cross-site request (403).
    pub fn misdirected(&self) -> bool {
        matches!(self, Refusal::NoHost { .. } | Refusal::ForeignHost { .. })
    }
}

/// The hosts a server answers to and the checks of a request head against them.
#[derive(Debug, Clone)]
pub struct Guard {
    /// Allowed names; a None port matches any port.
    allowed: Vec<Authority>,
    /// The loopback names and the bind address, as the messages list them.
    described: String,
}

impl Guard {
    /// The guard of a server listening on `bound`, configured with `bind` (`server.bind`,
    /// whose port may be 0) and `extra` (`server.allowed_hosts`, entries already checked).
    pub fn new(bind: &str, bound: SocketAddr, extra: &[String]) -> Guard {
        let port = bound.port();
        let mut allowed: Vec<Authority> = ["127.0.0.1", "localhost", "[::1]"]
            .iter()
            .map(|name| Authority { name: name.to_string(), port: Some(port) })
            .collect();
        if let Some(configured) = Authority::parse(bind).map(|a| Authority { port: Some(port), ..a })
            && !allowed.contains(&configured)
        {
            allowed.push(configured);
        }
        let bound = Authority::of(bound.ip(), port);
        if !allowed.contains(&bound) {
            allowed.push(bound);
        }
        let described = allowed.iter().map(Authority::to_string).collect::<Vec<_>>().join(", ");
        allowed.extend(extra.iter().filter_map(|e| Authority::parse(e.trim())));
        Guard { allowed, described }
    }

    /// The names allowed, whatever the port (IPv6 addresses in brackets).
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.allowed.iter().map(|a| a.name.clone()).collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    fn allows(&self, host: &Authority) -> bool {
        let port = host.port_or(80);
        self.allowed.iter().any(|a| a.name == host.name && a.port.is_none_or(|p| p == port))
    }

    /// Refuse a request that names a host this server does not answer to, or that a browser
    /// sent for a page of another origin.
    pub fn check(&self, method: &Method, uri: &Uri, headers: &HeaderMap) -> Result<(), Refusal> {
        let host = self.host(uri, headers)?;
        for site in headers.get_all("sec-fetch-site") {
            let site = String::from_utf8_lossy(site.as_bytes()).trim().to_ascii_lowercase();
            let read = method == Method::GET || method == Method::HEAD;
            if !(site == "same-origin" || (read && site == "none")) {
                return Err(Refusal::CrossSite { site });
            }
        }
        for origin in headers.get_all(header::ORIGIN) {
            let origin = String::from_utf8_lossy(origin.as_bytes()).trim().to_string();
            if !same_origin(&origin, &host) {
                return Err(Refusal::CrossOrigin { origin });
            }
        }
        Ok(())
    }

    /// The request's one Host, which must be allowed (as must the authority of an
    /// absolute-form request target, which would take precedence over it).
    fn host(&self, uri: &Uri, headers: &HeaderMap) -> Result<Authority, Refusal> {
        let no_host = || Refusal::NoHost { allowed: self.described.clone() };
        let mut hosts = headers.get_all(header::HOST).iter();
        let (Some(value), None) = (hosts.next(), hosts.next()) else { return Err(no_host()) };
        let text = value.to_str().map_err(|_| no_host())?.trim();
        let foreign = |host: &str| Refusal::ForeignHost { host: host.to_string(), allowed: self.described.clone() };
        let host = Authority::parse(text).ok_or_else(|| foreign(text))?;
        if !self.allows(&host) {
            return Err(foreign(text));
        }
        if let Some(target) = uri.authority() {
            match Authority::parse(target.as_str()) {
                Some(a) if self.allows(&a) => {}
                _ => return Err(foreign(target.as_str())),
            }
        }
        Ok(host)
    }
}

/// Whether `origin` (`scheme://host[:port]`) is the origin a browser sees for `host`.
fn same_origin(origin: &str, host: &Authority) -> bool {
    let lower = origin.to_ascii_lowercase();
    let (rest, default) = if let Some(rest) = lower.strip_prefix("http://") {
        (rest, 80)
    } else if let Some(rest) = lower.strip_prefix("https://") {
        (rest, 443)
    } else {
        return false; // "null" (a sandboxed frame, a file:// page) and anything odd
    };
    let Some(origin) = Authority::parse(rest) else { return false };
    // Browsers leave out the scheme's default port in both headers.
    let port = |a: &Authority| a.port.filter(|&p| p != default);
    origin.name == host.name && port(&origin) == port(host)
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn guard() -> Guard {
        Guard::new("127.0.0.1:0", "127.0.0.1:7878".parse().unwrap(), &["memfold.lan".into(), "10.0.0.5:9000".into()])
    }

    fn head(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (k, v) in pairs {
            headers
                .append(axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(), HeaderValue::from_str(v).unwrap());
        }
        headers
    }

    fn check(method: Method, pairs: &[(&str, &str)]) -> Result<(), Refusal> {
        guard().check(&method, &Uri::from_static("/facts"), &head(pairs))
    }

    #[test]
    fn the_names_cover_loopback_the_bind_address_and_allowed_hosts() {
        assert_eq!(guard().names(), ["10.0.0.5", "127.0.0.1", "[::1]", "localhost", "memfold.lan"]);
    }

    #[test]
    fn authorities_parse_like_host_headers() {
        let a = |name: &str, port: Option<u16>| Some(Authority { name: name.into(), port });
        assert_eq!(Authority::parse("LocalHost:7878"), a("localhost", Some(7878)));
        assert_eq!(Authority::parse("memfold.lan"), a("memfold.lan", None));
        assert_eq!(Authority::parse("[0:0:0:0:0:0:0:1]:80"), a("[::1]", Some(80)));
        assert_eq!(Authority::parse("[::1]"), a("[::1]", None));
        for bad in ["", ":7878", "a:", "a:b", "a:99999", "http://a", "a/b", "u@a", "::1", "[::1", "[x]", "a:+1", "a b"]
        {
            assert_eq!(Authority::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn loopback_names_on_the_bound_port_are_answered() {
        for host in ["127.0.0.1:7878", "localhost:7878", "LOCALHOST:7878", "[::1]:7878"] {
            assert_eq!(check(Method::POST, &[("host", host)]), Ok(()), "{host}");
        }
    }

    #[test]
    fn rebinding_names_and_other_ports_are_misdirected() {
        for host in ["evil.example:7878", "127.0.0.1:7879", "localhost", "127.0.0.1.evil.example:7878", "10.0.0.5:7878"]
        {
            let refusal = check(Method::GET, &[("host", host)]).unwrap_err();
            assert!(refusal.misdirected(), "{host}");
            assert!(refusal.to_string().contains(host), "{refusal}");
        }
        let refusal = check(Method::GET, &[]).unwrap_err();
        assert!(matches!(refusal, Refusal::NoHost { .. }), "{refusal}");
        let two = check(Method::GET, &[("host", "127.0.0.1:7878"), ("host", "evil.example")]).unwrap_err();
        assert!(matches!(two, Refusal::NoHost { .. }), "{two}");
    }

    #[test]
    fn configured_names_match_any_port_unless_they_give_one() {
        assert_eq!(check(Method::GET, &[("host", "memfold.lan")]), Ok(()));
        assert_eq!(check(Method::GET, &[("host", "memfold.lan:8443")]), Ok(()));
        assert_eq!(check(Method::GET, &[("host", "10.0.0.5:9000")]), Ok(()));
        assert!(check(Method::GET, &[("host", "10.0.0.5:9001")]).is_err());
    }

    #[test]
    fn the_bind_address_and_the_bound_address_are_answered_on_the_bound_port() {
        let guard = Guard::new("0.0.0.0:0", "0.0.0.0:41000".parse().unwrap(), &[]);
        let ok = |host: &str| guard.check(&Method::GET, &Uri::from_static("/"), &head(&[("host", host)]));
        assert_eq!(ok("0.0.0.0:41000"), Ok(()));
        assert!(ok("0.0.0.0:0").is_err());
        let guard = Guard::new("[::1]:7000", "[::1]:7000".parse().unwrap(), &[]);
        let ok = |host: &str| guard.check(&Method::GET, &Uri::from_static("/"), &head(&[("host", host)]));
        assert_eq!(ok("[::1]:7000"), Ok(()));
        assert_eq!(ok("localhost:7000"), Ok(()));
    }

    #[test]
    fn an_absolute_request_target_must_name_an_allowed_host_too() {
        let uri = Uri::from_static("http://evil.example:7878/facts");
        let refusal = guard().check(&Method::POST, &uri, &head(&[("host", "127.0.0.1:7878")])).unwrap_err();
        assert!(refusal.misdirected(), "{refusal}");
        let uri = Uri::from_static("http://localhost:7878/facts");
        assert_eq!(guard().check(&Method::POST, &uri, &head(&[("host", "127.0.0.1:7878")])), Ok(()));
    }

    #[test]
    fn foreign_origins_are_refused_on_every_method() {
        for origin in ["https://evil.example", "http://localhost:3000", "null", "http://127.0.0.1:7878.evil.example"] {
            for method in [Method::POST, Method::DELETE, Method::GET] {
                let refusal = check(method.clone(), &[("host", "127.0.0.1:7878"), ("origin", origin)]).unwrap_err();
                assert_eq!(refusal, Refusal::CrossOrigin { origin: origin.into() }, "{method} {origin}");
                assert!(!refusal.misdirected());
            }
        }
    }

    #[test]
    fn the_servers_own_origin_passes() {
        assert_eq!(check(Method::POST, &[("host", "127.0.0.1:7878"), ("origin", "http://127.0.0.1:7878")]), Ok(()));
        assert_eq!(check(Method::POST, &[("host", "memfold.lan"), ("origin", "https://memfold.lan")]), Ok(()));
        // Same name, other scheme default port or other port: another origin.
        assert!(check(Method::POST, &[("host", "localhost:7878"), ("origin", "http://127.0.0.1:7878")]).is_err());
        assert!(check(Method::POST, &[("host", "memfold.lan:8080"), ("origin", "http://memfold.lan")]).is_err());
    }

    #[test]
    fn cross_site_fetches_are_refused_and_typed_addresses_may_read() {
        let host = ("host", "localhost:7878");
        for site in ["cross-site", "same-site", "bogus"] {
            for method in [Method::POST, Method::GET] {
                let refusal = check(method, &[host, ("sec-fetch-site", site)]).unwrap_err();
                assert_eq!(refusal, Refusal::CrossSite { site: site.into() });
            }
        }
        assert_eq!(check(Method::POST, &[host, ("sec-fetch-site", "same-origin")]), Ok(()));
        assert_eq!(check(Method::GET, &[host, ("sec-fetch-site", "none")]), Ok(()));
        assert!(check(Method::POST, &[host, ("sec-fetch-site", "none")]).is_err());
    }

    #[test]
    fn requests_without_browser_headers_pass() {
        for method in [Method::GET, Method::POST, Method::DELETE] {
            assert_eq!(check(method, &[("host", "127.0.0.1:7878"), ("user-agent", "curl/8.5.0")]), Ok(()));
        }
    }
}
