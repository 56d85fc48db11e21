//! The zero-configuration default as root: the binary started with no `DATABASE_URL` and
//! no `STATKI_DATA_DIR` from a root-owned working directory of mode 0700 (a clone under
//! `/root`) starts its embedded PostgreSQL and serves `/readyz`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Stops the server with SIGTERM (so it stops its cluster) and removes the scratch dir.
struct Server {
    child: Child,
    scratch: std::path::PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

/// The status line of `GET path`, or the connection error.
fn get_status(port: u16, path: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    Ok(answer.lines().next().unwrap_or_default().to_owned())
}

#[test]
fn root_in_a_private_home_gets_a_served_embedded_default() {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_nanos();
    let scratch =
        std::env::temp_dir().join(format!("statki-root-home-{}-{nanos}", std::process::id()));
    let home = scratch.join("root-home");
    let clone = home.join("statki");
    std::fs::create_dir_all(&clone).expect("create the clone dir");
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).expect("chmod 700");
    if std::fs::metadata(&home).expect("stat").uid() != 0 {
        std::fs::remove_dir_all(&scratch).expect("clean up");
        eprintln!("skipped: the root default needs this test to run as root");
        return;
    }
    // Where systemd would put the service's state; stands in for /var/lib/statki so the
    // test leaves nothing behind on the machine.
    let state = scratch.join("state");
    std::fs::create_dir_all(&state).expect("create the state dir");
    std::fs::set_permissions(&scratch, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).expect("chmod");

    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_statki"))
        .current_dir(&clone)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("STATE_DIRECTORY", &state)
        .env("STATKI_LISTEN", format!("127.0.0.1:{port}"))
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .spawn()
        .expect("start statki");
    let mut server = Server {
        child,
        scratch: scratch.clone(),
    };

    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(exit) = server.child.try_wait().expect("poll the server") {
            panic!("statki exited before serving: {exit}");
        }
        match get_status(port, "/readyz") {
            Ok(status) if status.contains(" 200 ") => break status,
            _ if Instant::now() > deadline => panic!("no served /readyz within 90 s"),
            _ => std::thread::sleep(Duration::from_millis(200)),
        }
    };
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert!(
        state.join("pgdata").join("PG_VERSION").exists(),
        "the cluster lives in the state directory"
    );
    assert!(
        !clone.join(".statki").exists(),
        "nothing is left in the unreachable working directory"
    );
    assert!(Path::new(&home).exists());
}
