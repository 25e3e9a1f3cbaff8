//! Watches over WebSocket, as kube-apiserver serves them to browsers (which cannot read a
//! chunked stream with credentials they set): an HTTP/1.1 watch request that asks for a
//! WebSocket upgrade gets `101 Switching Protocols`, then each watch event as one message,
//! text for JSON and binary for protobuf (kube's `WatchServer.HandleWS`), and a close frame
//! when the watch ends. What the client sends is ignored, as kube ignores it; its closing the
//! connection ends the watch.

use base64::Engine;
use bytes::{BufMut, Bytes, BytesMut};
use http::HeaderMap;
use kubegate_policy::authn::bearer::{
    is_websocket_request, websocket_protocols, WEBSOCKET_BEARER_PROTOCOL_PREFIX,
};

/// RFC 6455's key suffix for `Sec-WebSocket-Accept`.
const ACCEPT_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The handshake a WebSocket watch request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handshake {
    /// `Sec-WebSocket-Accept`.
    pub accept: String,
    /// The subprotocol echoed back: the first one offered other than the token one, which
    /// the authenticator read and which must not be echoed.
    pub protocol: Option<String>,
}

/// The handshake for `headers`, when they ask for a WebSocket upgrade (version 13, with a
/// key); `None` for any other request.
pub fn handshake(headers: &HeaderMap) -> Option<Handshake> {
    let version = headers
        .get(http::header::SEC_WEBSOCKET_VERSION)
        .map(|v| v.as_bytes().trim_ascii());
    let key = headers
        .get(http::header::SEC_WEBSOCKET_KEY)?
        .to_str()
        .ok()?
        .trim();
    if !is_websocket_request(headers) || version != Some(b"13") || key.is_empty() {
        return None;
    }
    let digest = ring::digest::digest(
        &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
        format!("{key}{ACCEPT_GUID}").as_bytes(),
    );
    let protocol = websocket_protocols(headers)
        .into_iter()
        .find(|p| !p.is_empty() && !p.starts_with(WEBSOCKET_BEARER_PROTOCOL_PREFIX));
    Some(Handshake {
        accept: base64::engine::general_purpose::STANDARD.encode(digest.as_ref()),
        protocol,
    })
}

/// One unmasked server message: text (`binary` false) or binary.
pub fn message(payload: &[u8], binary: bool) -> Bytes {
    let mut out = BytesMut::with_capacity(payload.len() + 10);
    out.put_u8(if binary { 0x82 } else { 0x81 });
    match payload.len() {
        len @ 0..=125 => out.put_u8(len as u8),
        len @ 126..=0xffff => {
            out.put_u8(126);
            out.put_u16(len as u16);
        }
        len => {
            out.put_u8(127);
            out.put_u64(len as u64);
        }
    }
    out.put_slice(payload);
    out.freeze()
}

/// The close frame a finished watch ends with (1000, normal closure).
pub fn close() -> Bytes {
    Bytes::from_static(&[0x88, 0x02, 0x03, 0xe8])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                http::HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    #[test]
    fn the_accept_key_is_rfc_6455s_and_the_token_protocol_is_never_echoed() {
        let asked = headers(&[
            ("Upgrade", "websocket"),
            ("Connection", "keep-alive, Upgrade"),
            ("Sec-WebSocket-Version", "13"),
            // RFC 6455's example key and answer.
            ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
            (
                "Sec-WebSocket-Protocol",
                "base64url.bearer.authorization.k8s.io.dG9rZW4, base64.binary.k8s.io",
            ),
        ]);
        assert_eq!(
            handshake(&asked),
            Some(Handshake {
                accept: "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=".into(),
                protocol: Some("base64.binary.k8s.io".into()),
            })
        );
        let plain = headers(&[("Connection", "Upgrade"), ("Upgrade", "websocket")]);
        assert_eq!(handshake(&plain), None, "no key, no handshake");
        assert_eq!(handshake(&HeaderMap::new()), None);
    }

    #[test]
    fn messages_carry_their_length_in_the_shortest_form() {
        assert_eq!(&message(b"hi", false)[..], &[0x81, 2, b'h', b'i']);
        let medium = message(&[0u8; 300], true);
        assert_eq!(&medium[..4], &[0x82, 126, 0x01, 0x2c]);
        assert_eq!(medium.len(), 304);
        let large = message(&vec![0u8; 70_000], false);
        assert_eq!(&large[..2], &[0x81, 127]);
        assert_eq!(&large[2..10], &70_000u64.to_be_bytes());
    }
}
