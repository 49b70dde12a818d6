//! The SSRF guard's decisions, pure: which URLs may be fetched and which
//! addresses may be connected to. The client ([`super::HttpClient`]) asks
//! these before every request, on every redirect and for every address DNS
//! returns.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;
use url::{Host, Url};

/// Why an outbound request was refused before it was sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("only http and https URLs can be fetched, not {0}:")]
    Scheme(String),
    #[error("the URL has no host")]
    NoHost,
    #[error(
        "refused to connect to {address} ({class} address); set TRELLIS_ALLOW_PRIVATE_FEEDS=true to allow private networks"
    )]
    Address {
        address: IpAddr,
        class: &'static str,
    },
    #[error("only {configured}, as configured, may be reached here, not {url}")]
    NotConfigured { url: String, configured: String },
    #[error("{host} resolves only to addresses that may not be fetched ({address} is {class})")]
    Resolved {
        host: String,
        address: IpAddr,
        class: &'static str,
    },
}

/// Where one caller's requests may go: each caller of the client (feed
/// pulls, discovery, the docs platforms, the gateway's providers) has its
/// own.
#[derive(Debug, Clone)]
pub enum Destination {
    /// URLs users supply (feeds, discovery, favicons): any public address,
    /// plus the instance's exceptions (`TRELLIS_ALLOW_PRIVATE_FEEDS`,
    /// `TRELLIS_ALLOW_PRIVATE_NETWORKS`).
    Guarded(AddressPolicy),
    /// The one origin (scheme, host, port) an admin configured — a docs
    /// platform's API, the Kavita server, AniList — reachable exactly as
    /// configured, on loopback or a private network too, and nothing else:
    /// another URL, or a redirect off it, is refused. Allowing a LAN Kavita
    /// server never opens feed pulls to private addresses.
    Configured(url::Origin),
}

impl Default for Destination {
    fn default() -> Self {
        Destination::Guarded(AddressPolicy::default())
    }
}

impl Destination {
    /// The configured endpoint's origin, from its base URL.
    pub fn configured(base: &Url) -> Result<Destination, Refusal> {
        match base.scheme() {
            "http" | "https" => {}
            other => return Err(Refusal::Scheme(other.to_owned())),
        }
        if base.host().is_none() {
            return Err(Refusal::NoHost);
        }
        Ok(Destination::Configured(base.origin()))
    }

    /// Checks what can be checked from the URL alone (before the request
    /// and on every redirect).
    pub fn check_url(&self, url: &Url) -> Result<(), Refusal> {
        match self {
            Destination::Guarded(policy) => check_url(url, policy),
            Destination::Configured(origin) => {
                if url.origin() == *origin {
                    Ok(())
                } else {
                    Err(Refusal::NotConfigured {
                        url: url.origin().ascii_serialization(),
                        configured: origin.ascii_serialization(),
                    })
                }
            }
        }
    }

    /// Whether a resolved address of `host` may be connected to.
    pub fn check_address(&self, host: &str, address: IpAddr) -> Result<(), Refusal> {
        match self {
            Destination::Guarded(policy) => check_address(address, policy),
            // Only the configured host is ever asked for (its URLs are
            // checked first); its addresses are the admin's choice.
            Destination::Configured(url::Origin::Tuple(_, Host::Domain(configured), _))
                if configured.eq_ignore_ascii_case(host) =>
            {
                Ok(())
            }
            Destination::Configured(origin) => Err(Refusal::NotConfigured {
                url: host.to_owned(),
                configured: origin.ascii_serialization(),
            }),
        }
    }
}

/// Which non-public addresses may be reached anyway.
#[derive(Debug, Clone, Default)]
pub struct AddressPolicy {
    /// `TRELLIS_ALLOW_PRIVATE_FEEDS`: every address.
    pub allow_private: bool,
    /// `TRELLIS_ALLOW_PRIVATE_NETWORKS`: just these networks (say, one LAN
    /// host serving feeds), everything else still guarded.
    pub allowed_networks: Vec<IpNet>,
}

impl AddressPolicy {
    fn allows(&self, address: IpAddr) -> bool {
        let mapped = match address {
            IpAddr::V6(v6) => embedded_v4(v6).map(IpAddr::V4),
            IpAddr::V4(_) => None,
        };
        self.allow_private
            || self.allowed_networks.iter().any(|network| {
                network.contains(&address) || mapped.is_some_and(|v4| network.contains(&v4))
            })
    }
}

/// Checks what can be checked from the URL alone: the scheme, and the
/// address when the host is an IP literal (no DNS lookup happens for those).
pub fn check_url(url: &Url, policy: &AddressPolicy) -> Result<(), Refusal> {
    match url.scheme() {
        "http" | "https" => {}
        other => return Err(Refusal::Scheme(other.to_owned())),
    }
    let address = match url.host() {
        None => return Err(Refusal::NoHost),
        Some(Host::Domain(_)) => return Ok(()),
        Some(Host::Ipv4(v4)) => IpAddr::V4(v4),
        Some(Host::Ipv6(v6)) => IpAddr::V6(v6),
    };
    check_address(address, policy)
}

/// Refuses an address in a non-public range unless the policy allows it.
pub fn check_address(address: IpAddr, policy: &AddressPolicy) -> Result<(), Refusal> {
    match non_public_class(address) {
        Some(class) if !policy.allows(address) => Err(Refusal::Address { address, class }),
        _ => Ok(()),
    }
}

/// The kind of non-public range `address` is in, or `None` for a public
/// (globally routable unicast) address. IPv6 forms that embed an IPv4
/// address (mapped, compatible, NAT64, 6to4) are judged by that address.
pub fn non_public_class(address: IpAddr) -> Option<&'static str> {
    match address {
        IpAddr::V4(v4) => v4_class(v4),
        IpAddr::V6(v6) => v6_class(v6),
    }
}

fn v4_class(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        _ if ip.is_unspecified() || a == 0 => "an unspecified",
        _ if ip.is_loopback() => "a loopback",
        (10, _, _) | (172, 16..=31, _) | (192, 168, _) => "a private",
        (100, 64..=127, _) => "a carrier-grade NAT",
        _ if ip.is_link_local() => "a link-local",
        _ if ip.is_multicast() => "a multicast",
        _ if ip.is_broadcast() || a >= 240 => "a reserved",
        (192, 0, 0) | (198, 18..=19, _) | (192, 88, 99) => "a reserved",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "a documentation",
        _ => return None,
    })
}

fn v6_class(ip: Ipv6Addr) -> Option<&'static str> {
    if let Some(embedded) = embedded_v4(ip) {
        // An embedded IPv4 address is exactly as fetchable as itself.
        return v4_class(embedded);
    }
    let segments = ip.segments();
    Some(match segments[0] {
        _ if ip.is_unspecified() => "an unspecified",
        _ if ip.is_loopback() => "a loopback",
        s if s & 0xfe00 == 0xfc00 => "a private (unique local)",
        s if s & 0xffc0 == 0xfe80 => "a link-local",
        s if s & 0xffc0 == 0xfec0 => "a site-local",
        s if s & 0xff00 == 0xff00 => "a multicast",
        // Teredo tunnels reach IPv4 hosts by an obfuscated address.
        0x2001 if segments[1] == 0 => "a Teredo",
        // Local-use NAT64 (RFC 8215): a translator inside some network.
        0x64 if segments[1] == 0xff9b && segments[2] == 1 => "a local NAT64",
        0x2001 if segments[1] == 0x0db8 => "a documentation",
        _ => return None,
    })
}

/// The IPv4 address inside an IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible
/// (`::a.b.c.d`), IPv4-translated (`::ffff:0:a.b.c.d`), NAT64
/// (`64:ff9b::a.b.c.d`) or 6to4 (`2002:ab:cd::`) address.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let tail = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] => Some(tail),
        // IPv4-translated (SIIT).
        [0, 0, 0, 0, 0xffff, 0, _, _] => Some(tail),
        // `::` and `::1` are IPv6's own unspecified and loopback.
        [0, 0, 0, 0, 0, 0, _, _] if !ip.is_unspecified() && !ip.is_loopback() => Some(tail),
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(tail),
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::new(
            (hi >> 8) as u8,
            hi as u8,
            (lo >> 8) as u8,
            lo as u8,
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocked(address: &str) -> bool {
        non_public_class(address.parse().unwrap()).is_some()
    }

    #[test]
    fn non_public_ipv4_ranges_are_blocked() {
        for address in [
            "0.0.0.0",
            "0.1.2.3",
            "127.0.0.1",
            "127.255.0.9",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "100.64.0.1",
            "100.127.255.254",
            "169.254.169.254",
            "224.0.0.1",
            "239.255.255.250",
            "255.255.255.255",
            "240.0.0.1",
            "198.18.0.1",
            "192.0.2.7",
        ] {
            assert!(blocked(address), "{address} should be blocked");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for address in [
            "93.184.215.14",
            "1.1.1.1",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700:4700::1111",
            "::ffff:1.1.1.1",
            "2002:0101:0101::1",
        ] {
            assert!(!blocked(address), "{address} should pass");
        }
    }

    #[test]
    fn non_public_ipv6_and_embedded_ipv4_are_blocked() {
        for address in [
            "::",
            "::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::7f00:1",
            "2002:7f00:0001::1",
            "2001:db8::1",
            "::ffff:0:7f00:1",
            "64:ff9b:1::a00:1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "192.88.99.1",
        ] {
            assert!(blocked(address), "{address} should be blocked");
        }
    }

    #[test]
    fn urls_are_checked_for_scheme_and_literal_addresses() {
        let guarded = AddressPolicy::default();
        let check = |url: &str| check_url(&Url::parse(url).unwrap(), &guarded);
        assert!(check("https://example.com/feed.xml").is_ok());
        assert!(matches!(check("file:///etc/passwd"), Err(Refusal::Scheme(s)) if s == "file"));
        assert!(matches!(
            check("gopher://example.com/"),
            Err(Refusal::Scheme(_))
        ));
        assert!(matches!(
            check("http://127.0.0.1:8080/"),
            Err(Refusal::Address {
                class: "a loopback",
                ..
            })
        ));
        assert!(matches!(
            check("http://[::ffff:7f00:1]/"),
            Err(Refusal::Address {
                class: "a loopback",
                ..
            })
        ));
        // The url crate normalises exotic IPv4 spellings before we see them.
        assert!(check("http://2130706433/").is_err());
        assert!(check("http://0x7f.1/").is_err());
        // With the override, private addresses are allowed; schemes never are.
        let open = AddressPolicy {
            allow_private: true,
            ..Default::default()
        };
        let allowed = |url: &str| check_url(&Url::parse(url).unwrap(), &open);
        assert!(allowed("http://127.0.0.1:8080/").is_ok());
        assert!(allowed("ftp://127.0.0.1/").is_err());
    }

    #[test]
    fn a_configured_endpoint_is_reachable_exactly_as_configured() {
        let kavita =
            Destination::configured(&Url::parse("http://192.168.1.20:5000/").unwrap()).unwrap();
        let check = |url: &str| kavita.check_url(&Url::parse(url).unwrap());
        // Its own origin, private as it is, with any path and query.
        assert!(check("http://192.168.1.20:5000/api/Plugin/authenticate?apiKey=k").is_ok());
        // Not another port, scheme or host, not a neighbour, not the internet.
        for other in [
            "http://192.168.1.20:5001/api",
            "https://192.168.1.20:5000/api",
            "http://192.168.1.21:5000/api",
            "http://127.0.0.1:5000/",
            "https://example.com/",
        ] {
            assert!(
                matches!(check(other), Err(Refusal::NotConfigured { .. })),
                "{other}"
            );
        }
        // A named host: its addresses are the admin's choice, other names are refused.
        let named = Destination::configured(&Url::parse("https://kavita.lan/").unwrap()).unwrap();
        assert!(
            named
                .check_address("kavita.lan", "10.0.0.5".parse().unwrap())
                .is_ok()
        );
        assert!(
            named
                .check_address("KAVITA.lan", "127.0.0.1".parse().unwrap())
                .is_ok()
        );
        assert!(
            named
                .check_address("evil.example", "10.0.0.5".parse().unwrap())
                .is_err()
        );
        // The guarded destination keeps the full guard.
        let feeds = Destination::default();
        assert!(
            feeds
                .check_url(&Url::parse("http://192.168.1.20:5000/").unwrap())
                .is_err()
        );
        assert!(Destination::configured(&Url::parse("file:///etc/passwd").unwrap()).is_err());
    }

    #[test]
    fn allowed_networks_open_only_themselves() {
        let policy = AddressPolicy {
            allow_private: false,
            allowed_networks: vec!["127.0.0.1/32".parse().unwrap()],
        };
        let check = |address: &str| check_address(address.parse().unwrap(), &policy);
        assert!(check("127.0.0.1").is_ok());
        assert!(check("::ffff:127.0.0.1").is_ok());
        assert!(check("127.0.0.2").is_err());
        assert!(check("10.0.0.1").is_err());
        assert!(check("::1").is_err());
    }
}
