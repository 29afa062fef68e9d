use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, SizeHint};

use super::{BodyBudget, DRAIN_MAX_BYTES, MAX_REQUEST_BODY_BYTES, read_body};

/// A body of `chunks` that announces `announced` bytes (none: unknown, as chunked
/// HTTP/1.1 and HTTP/2 without `content-length`), then stays open when `open` is set.
struct Chunks {
    chunks: VecDeque<Bytes>,
    announced: Option<u64>,
    open: bool,
}

impl Body for Chunks {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.chunks.pop_front() {
            Some(chunk) => Poll::Ready(Some(Ok(Frame::data(chunk)))),
            None if self.open => Poll::Pending,
            None => Poll::Ready(None),
        }
    }

    fn size_hint(&self) -> SizeHint {
        self.announced
            .map_or_else(SizeHint::default, SizeHint::with_exact)
    }
}

fn request(chunks: &[usize], announced: Option<u64>, open: bool) -> Request<Chunks> {
    let chunks = chunks.iter().map(|&n| Bytes::from(vec![b'x'; n])).collect();
    Request::new(Chunks {
        chunks,
        announced,
        open,
    })
}

const LONG: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_body_holds_its_share_of_the_budget_until_answered() {
    let budget = BodyBudget::new(10_000);
    let (read, share) = read_body(request(&[3_000, 1_000], None, false), LONG, &budget)
        .await
        .expect("read");
    let body = read.into_body().collect().await.expect("body").to_bytes();
    assert_eq!(body.len(), 4_000);
    assert_eq!(budget.held(), 4_000);
    drop(share);
    assert_eq!(budget.held(), 0);

    // Announced bodies take their length up front.
    let (_, share) = read_body(request(&[2_500], Some(2_500), false), LONG, &budget)
        .await
        .expect("read");
    assert_eq!(budget.held(), 2_500);
    drop(share);
}

#[tokio::test]
async fn bodies_past_the_budget_are_refused_and_the_budget_comes_back() {
    let budget = BodyBudget::new(10_000);
    let (_, held) = read_body(request(&[8_000], None, false), LONG, &budget)
        .await
        .expect("read");
    // Unknown length: refused as its bytes pass the budget.
    let refused = read_body(request(&[1_000, 1_500], None, false), LONG, &budget)
        .await
        .expect_err("over the budget");
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.headers()["retry-after"], "1");
    assert_eq!(refused.headers()["connection"], "close");
    let text = refused
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    assert!(
        String::from_utf8_lossy(&text).contains("\"overloaded\""),
        "{text:?}"
    );
    // Announced: refused before any of it is held, read to its end for its request's id,
    // and answered as that request's error in a 200 (the connection kept).
    let refused = read_body(whole_request(7, 2_500), LONG, &budget)
        .await
        .expect_err("over the budget");
    assert_eq!(refused.status(), StatusCode::OK);
    assert_eq!(refused.headers()["retry-after"], "1");
    assert!(refused.headers().get("connection").is_none());
    let answer = json_of(refused).await;
    assert_eq!(answer["id"], 7, "{answer}");
    assert_eq!(answer["error"]["code"], -32005, "{answer}");
    assert_eq!(answer["error"]["data"]["code"], "overloaded", "{answer}");
    assert_eq!(
        answer["error"]["data"]["scope"], "request_bodies",
        "{answer}"
    );
    assert_eq!(budget.held(), 8_000, "refused bodies hold nothing");
    drop(held);
    let (_, _share) = read_body(request(&[1_000, 1_500], None, false), LONG, &budget)
        .await
        .expect("room again");
}

#[tokio::test]
async fn a_body_announced_too_large_is_refused_before_it_is_read() {
    let budget = BodyBudget::new(64 * 1024 * 1024);
    // More than is ever read for an id: refused at once.
    let announced = DRAIN_MAX_BYTES + 1;
    // The body never sends a byte: reading it would wait for BodyTimeout.
    let refused = tokio::time::timeout(
        Duration::from_secs(5),
        read_body(request(&[], Some(announced), true), LONG, &budget),
    )
    .await
    .expect("answered at once")
    .expect_err("too large");
    assert_eq!(refused.status(), StatusCode::PAYLOAD_TOO_LARGE);
    // Unannounced, it is refused as it grows past the limit.
    let refused = read_body(
        request(&[MAX_REQUEST_BODY_BYTES, 1], None, false),
        LONG,
        &budget,
    )
    .await
    .expect_err("too large");
    assert_eq!(refused.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(budget.held(), 0);
}

/// A body over the size that says its length (at most `DRAIN_MAX_BYTES`) is read to its end,
/// none of it kept, and refused as its request's error in a 200; one that is no request,
/// or ends late, gets the 413 with the connection closed.
#[tokio::test]
async fn a_body_too_large_is_its_requests_error_once_read_to_its_end() {
    let budget = BodyBudget::new(64 * 1024 * 1024);
    let size = MAX_REQUEST_BODY_BYTES + 1_000;
    let refused = read_body(whole_request(9, size), LONG, &budget)
        .await
        .expect_err("too large");
    assert_eq!(refused.status(), StatusCode::OK);
    let answer = json_of(refused).await;
    assert_eq!(answer["id"], 9, "{answer}");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert_eq!(budget.held(), 0);
    let text = " ".repeat(size);
    let announced = Some(size as u64);
    let refused = read_body(request_of(&text, announced, false), LONG, &budget)
        .await
        .expect_err("too large");
    assert_eq!(refused.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(refused.headers()["connection"], "close");
    let short = Duration::from_millis(50);
    let refused = read_body(request_of(&text[..10], announced, true), short, &budget)
        .await
        .expect_err("too large");
    assert_eq!(refused.status(), StatusCode::PAYLOAD_TOO_LARGE);
}

/// A `ping` of id `id` padded to `size` bytes, its length announced.
fn whole_request(id: u64, size: usize) -> Request<Chunks> {
    let text = format!(r#"{{"jsonrpc":"2.0","method":"ping","id":{id}}}"#);
    let padded = format!("{text}{}", " ".repeat(size - text.len()));
    request_of(&padded, Some(size as u64), false)
}

fn request_of(text: &str, announced: Option<u64>, open: bool) -> Request<Chunks> {
    Request::new(Chunks {
        chunks: VecDeque::from([Bytes::from(text.to_owned())]),
        announced,
        open,
    })
}

async fn json_of(response: http::Response<crate::server::routes::Body>) -> serde_json::Value {
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    serde_json::from_slice(&bytes).expect("JSON")
}

#[tokio::test]
async fn a_body_that_does_not_arrive_in_time_is_answered_408() {
    let budget = BodyBudget::new(10_000);
    let refused = read_body(
        request(&[100], None, true),
        Duration::from_millis(50),
        &budget,
    )
    .await
    .expect_err("timed out");
    assert_eq!(refused.status(), StatusCode::REQUEST_TIMEOUT);
    assert_eq!(budget.held(), 0);
}
