//! A Redis of a test's own (Debian's `redis-server`, which the lab script installs), for
//! what the shared lab Redis must not suffer: being paused, or served over TLS.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::tls::Pki;

pub struct RedisServer {
    pub port: u16,
    child: Child,
}

impl RedisServer {
    /// Plain Redis on a free loopback port, nothing persisted.
    pub async fn start() -> RedisServer {
        Self::spawn(&[]).await
    }

    /// Redis serving TLS only, with `pki`'s localhost certificate; clients need no
    /// certificate of their own.
    pub async fn start_tls(pki: &Pki) -> RedisServer {
        let cert = pki.cert_file.to_str().unwrap();
        let key = pki.key_file.to_str().unwrap();
        let ca = pki.ca_file.to_str().unwrap();
        Self::spawn(&[
            "--tls-cert-file",
            cert,
            "--tls-key-file",
            key,
            "--tls-ca-cert-file",
            ca,
            "--tls-auth-clients",
            "no",
        ])
        .await
    }

    async fn spawn(tls: &[&str]) -> RedisServer {
        let port = super::free_port();
        let port_text = port.to_string();
        let mut args = vec!["--save", "", "--appendonly", "no", "--bind", "127.0.0.1"];
        if tls.is_empty() {
            args.extend(["--port", &port_text]);
        } else {
            args.extend(["--port", "0", "--tls-port", &port_text]);
            args.extend(tls);
        }
        let child = Command::new("redis-server")
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server (Debian's redis-server; deploy/lab/start-zabbix.sh installs it)");
        super::eventually(
            "redis-server to listen",
            Duration::from_secs(20),
            || async {
                tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .ok()
                    .map(|_| ())
            },
        )
        .await;
        RedisServer { port, child }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Empties this Redis (`FLUSHALL`), as one restarted without its data would be.
    pub async fn flush_all(&self) {
        let client = redis::Client::open(self.url()).unwrap();
        let mut connection = client.get_multiplexed_async_connection().await.unwrap();
        let () = redis::cmd("FLUSHALL")
            .query_async(&mut connection)
            .await
            .unwrap();
    }

    /// Holds every client's commands for `pause` (`CLIENT PAUSE … ALL`), as a slow Redis
    /// would; returns once the pause is in force, so what is sent next waits behind it.
    pub async fn pause(&self, pause: Duration) {
        let client = redis::Client::open(self.url()).unwrap();
        let mut connection = client.get_multiplexed_async_connection().await.unwrap();
        let () = redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(u64::try_from(pause.as_millis()).unwrap())
            .arg("ALL")
            .query_async(&mut connection)
            .await
            .unwrap();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
