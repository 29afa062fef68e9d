//! The direct path's reading of a request body: rmcp's own parse, or the same request
//! sooner for a well-formed `tools/call` or `tools/list`.
//!
//! rmcp reads any message by buffering it into serde's content tree, checking its shape
//! from that (`method` and `id`, neither `result` nor `error`), and then trying the
//! variants of `ClientRequest` in turn: a `tools/call` is the fourteenth, after thirteen
//! refusals, each an error built and dropped: 18,000 instructions of a `host_get` (one in
//! thirty-five) and 13,000 of a `tools/list` (one in six). The quick way checks the shape
//! with the scan that checks Zabbix's answers (it finds top-level `result` and `error`
//! the same way: by name, escaped names decoded, given twice refused) and reads the body
//! as rmcp's `CallToolRequest` or `ListToolsRequest`, the variant rmcp picks for these
//! methods, with rmcp's own deserializers. A body it does not take goes the full way, so
//! every other message and every error stays rmcp's; a unit test holds the quick way to
//! rmcp's answer on 20,000 mutated bodies.

use memchr::memmem;
use rmcp::model::{
    CallToolRequest, ClientJsonRpcMessage, ClientRequest, JsonRpcMessage, JsonRpcRequest,
    ListToolsRequest, RequestId,
};

use crate::zabbix::scan;

/// The method name as a list request spells it: read as a list first where it appears,
/// so a list is not first read as a call and refused (an error built and dropped).
const LIST_METHOD: &[u8] = b"\"tools/list\"";

/// The request in `body`, as rmcp reads it; `None` where rmcp reads no request.
pub(crate) fn request(body: &[u8]) -> Option<(RequestId, ClientRequest)> {
    quick(body).or_else(|| full(body))
}

/// A `tools/call` or `tools/list` request shaped as one; `None` for anything else.
fn quick(body: &[u8]) -> Option<(RequestId, ClientRequest)> {
    // A request has no result: one that names a non-empty one is not read here.
    let spans = scan::answer(body, 0).ok()?;
    if spans.result_or_error_named {
        return None;
    }
    // Only the order of the two tries depends on the hint: each is rmcp's own read.
    if memmem::find(body, LIST_METHOD).is_some() {
        as_list(body).or_else(|| as_call(body))
    } else {
        as_call(body).or_else(|| as_list(body))
    }
}

fn as_call(body: &[u8]) -> Option<(RequestId, ClientRequest)> {
    let JsonRpcRequest { id, request, .. } =
        serde_json::from_slice::<JsonRpcRequest<CallToolRequest>>(body).ok()?;
    Some((id, ClientRequest::CallToolRequest(request)))
}

fn as_list(body: &[u8]) -> Option<(RequestId, ClientRequest)> {
    let JsonRpcRequest { id, request, .. } =
        serde_json::from_slice::<JsonRpcRequest<ListToolsRequest>>(body).ok()?;
    Some((id, ClientRequest::ListToolsRequest(request)))
}

/// rmcp's parse of any message.
fn full(body: &[u8]) -> Option<(RequestId, ClientRequest)> {
    match serde_json::from_slice::<ClientJsonRpcMessage>(body) {
        Ok(JsonRpcMessage::Request(JsonRpcRequest { id, request, .. })) => Some((id, request)),
        _ => None,
    }
}

#[cfg(test)]
#[path = "direct_parse_tests.rs"]
mod tests;
