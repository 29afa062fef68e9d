//! The JSON-RPC request path through the router: arbitrary bytes as the body of
//! `POST /mcp` (stateless mode), through authentication, rmcp's parsing, tool lookup,
//! validation, policy and a stub Zabbix that answers everything with an empty list. Every
//! input must get an HTTP answer; nothing may panic.
#![no_main]

mod common {
    pub mod world;
}

use std::net::IpAddr;

use bytes::Bytes;
use http_body_util::BodyExt;
use libfuzzer_sys::fuzz_target;

use common::world::{mcp_post, world};

fuzz_target!(|data: &[u8]| {
    let world = world(|_| None);
    let request = mcp_post(Bytes::copy_from_slice(data));
    let peer: IpAddr = [127, 0, 0, 1].into();
    world.runtime.block_on(async {
        let response = world.router.handle(request, peer).await;
        let status = response.status();
        let _ = response.into_body().collect().await;
        assert!(status.as_u16() < 600);
    });
});
