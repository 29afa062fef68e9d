//! A Redis of a unit test's own (Debian's `redis-server`), for what the shared lab Redis
//! must not suffer: a thousand dead entries in its pending index, keys deleted under a
//! running call.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) struct OwnRedis {
    pub(crate) port: u16,
    child: Child,
}

impl OwnRedis {
    /// Plain Redis on a free loopback port, nothing persisted; returns once it answers.
    pub(crate) fn start() -> OwnRedis {
        let port = std::net::TcpListener::bind(("127.0.0.1", 0))
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new("redis-server")
            .args(["--save", "", "--appendonly", "no", "--bind", "127.0.0.1"])
            .args(["--port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server (Debian's; deploy/lab/start-zabbix.sh installs it)");
        let redis = OwnRedis { port, child };
        let deadline = Instant::now() + Duration::from_secs(20);
        while redis.connection().is_err() {
            assert!(Instant::now() < deadline, "redis-server did not answer");
            std::thread::sleep(Duration::from_millis(20));
        }
        redis
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A plain connection, for what a test does to Redis behind the store's back.
    pub(crate) fn connection(&self) -> redis::RedisResult<redis::Connection> {
        let client = redis::Client::open(self.url())?;
        let mut connection = client.get_connection()?;
        redis::cmd("PING").query::<()>(&mut connection)?;
        Ok(connection)
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
