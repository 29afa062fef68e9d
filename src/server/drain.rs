//! The rest of a refused body, read and dropped, for its request's id. A body refused as
//! too large or over the memory budget is read on to its announced end (none of it kept)
//! so that the refusal can be that request's JSON-RPC error: clients read an HTTP error
//! on a POST as the failure of their transport, and the official Python SDK (1.30) ended
//! the whole client with every call in flight. Reading it whole also lets the answer
//! reach a client still sending: closing on unread bytes resets the connection under it.

use std::pin::Pin;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Body as HttpBody;
use rmcp::model::RequestId;
use tokio::time::Instant;

/// The most bytes read and dropped for one refused body (its `Content-Length` says more:
/// it is not read).
pub(crate) const DRAIN_MAX_BYTES: u64 = 8 * 1024 * 1024;

/// An id longer than this is not one a client sends: it is not taken.
const ID_MAX_BYTES: usize = 256;

/// Where a top-level member of the body is, as the bytes go by.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Member {
    #[default]
    Other,
    Id,
    Method,
}

/// Finds the top-level `id` of a JSON object read in pieces, holding at most
/// [`ID_MAX_BYTES`]: nesting is counted, strings are skipped (escapes too), and only the
/// object's own members are named. Not a JSON parser: a body it cannot follow has no id.
#[derive(Debug, Default)]
pub(crate) struct IdScan {
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// At depth 1, the next string is a member's name.
    expect_name: bool,
    /// The string being read is a member's name (of at most 6 bytes worth keeping).
    in_name: bool,
    name: Vec<u8>,
    member: Member,
    /// The id's value is being read.
    capturing: bool,
    value: Vec<u8>,
    id: Option<Vec<u8>>,
    method: bool,
    /// The top-level object has ended.
    done: bool,
    broken: bool,
}

impl IdScan {
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            if self.done || self.broken {
                return;
            }
            self.byte(byte);
        }
    }

    fn byte(&mut self, byte: u8) {
        if self.capturing {
            if self.value.len() >= ID_MAX_BYTES {
                self.broken = true;
                return;
            }
            self.value.push(byte);
        }
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if byte == b'\\' {
                self.escaped = true;
            } else if byte == b'"' {
                self.in_string = false;
                if self.in_name {
                    self.in_name = false;
                    self.member = match self.name.as_slice() {
                        b"id" => Member::Id,
                        b"method" => Member::Method,
                        _ => Member::Other,
                    };
                    return;
                }
            }
            if self.in_name && self.name.len() < 8 {
                self.name.push(byte);
            }
            return;
        }
        match byte {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.expect_name {
                    self.in_name = true;
                    self.name.clear();
                }
            }
            b'{' | b'[' => {
                if self.depth == 0 && byte != b'{' {
                    self.broken = true;
                }
                self.depth += 1;
                if self.depth == 1 {
                    self.expect_name = true;
                }
            }
            b'}' | b']' => match self.depth {
                0 => self.broken = true,
                1 => {
                    self.end_member();
                    self.depth = 0;
                    self.done = true;
                }
                _ => self.depth -= 1,
            },
            b':' if self.depth == 1 => {
                self.expect_name = false;
                match self.member {
                    Member::Id => {
                        self.capturing = true;
                        self.value.clear();
                    }
                    Member::Method => self.method = true,
                    Member::Other => {}
                }
            }
            b',' if self.depth == 1 => {
                self.end_member();
                self.expect_name = true;
            }
            byte if byte.is_ascii_whitespace() => {}
            _ if self.depth == 0 => self.broken = true,
            _ => {}
        }
    }

    /// A member ends: the id's value, if it was the id (given twice: none).
    fn end_member(&mut self) {
        if !self.capturing {
            return;
        }
        self.capturing = false;
        // The byte that ended it (`,` or `}`) is not the value's.
        self.value.pop();
        if self.id.is_some() {
            self.broken = true;
        }
        self.id = Some(std::mem::take(&mut self.value));
    }

    /// The id of the request the bytes fed were, if they were one (a whole object with a
    /// `method` and an `id`, read as rmcp reads ids).
    pub(crate) fn request_id(&self) -> Option<RequestId> {
        if self.broken || !self.done || !self.method {
            return None;
        }
        serde_json::from_slice(self.id.as_deref()?).ok()
    }
}

/// Reads `body` on to its end by `deadline`, at most [`DRAIN_MAX_BYTES`] in all with
/// `read` (what was read of it before), keeping none of it: the request's id, if it was a
/// request and ended in time.
pub(crate) async fn request_id<B>(
    mut body: Pin<&mut B>,
    read: Vec<u8>,
    deadline: Instant,
) -> Option<RequestId>
where
    B: HttpBody<Data = Bytes>,
{
    let mut scan = IdScan::default();
    scan.feed(&read);
    let mut total = read.len() as u64;
    drop(read);
    let drain = async {
        while let Some(frame) = body.frame().await {
            let Ok(data) = frame.ok()?.into_data() else {
                continue;
            };
            total += data.len() as u64;
            if total > DRAIN_MAX_BYTES {
                return None;
            }
            scan.feed(&data);
        }
        Some(())
    };
    tokio::time::timeout_at(deadline, drain).await.ok()??;
    scan.request_id()
}

#[cfg(test)]
#[path = "drain_tests.rs"]
mod tests;
