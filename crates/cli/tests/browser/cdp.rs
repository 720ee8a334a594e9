//! A headless Chromium driven over the Chrome DevTools Protocol: just enough to load a
//! page, evaluate JavaScript, move the mouse, take screenshots and collect every console
//! error, warning and uncaught exception. Synchronous (tungstenite over a std socket).

use std::io::ErrorKind;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tungstenite::{Message, WebSocket};

/// Debian's chromium (installed by scripts/setup-ci.sh).
pub const CHROMIUM: &str = "/usr/bin/chromium";
/// Set to 1 to skip browser tests on a machine without chromium.
pub const SKIP_VAR: &str = "WORLDMESH_SKIP_BROWSER";

/// True if the browser tests should run; panics with instructions when chromium is
/// missing and skipping was not asked for.
pub fn browser_available() -> bool {
    if Path::new(CHROMIUM).exists() {
        return true;
    }
    if std::env::var(SKIP_VAR).is_ok_and(|v| v == "1") {
        eprintln!("{CHROMIUM} missing and {SKIP_VAR}=1: browser test skipped");
        return false;
    }
    panic!(
        "{CHROMIUM} is missing: run `bash scripts/setup-ci.sh` (it installs Debian's chromium; \
         CI runs it), or set {SKIP_VAR}=1 to skip the browser tests"
    );
}

/// A running headless browser with one page attached.
pub struct Browser {
    child: Child,
    dir: PathBuf,
    ws: WebSocket<TcpStream>,
    next_id: u64,
    session: String,
    /// Console errors, uncaught exceptions and error log entries, as text.
    pub errors: Vec<String>,
    /// Console warnings and warning log entries.
    pub warnings: Vec<String>,
}

impl Browser {
    /// Starts chromium with a fresh profile and a `width` × `height` page.
    pub fn launch(name: &str, width: u32, height: u32) -> Browser {
        let dir = std::env::temp_dir().join(format!("wm-chromium-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let child = Command::new(CHROMIUM)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                &format!("--window-size={width},{height}"),
                &format!("--user-data-dir={}", dir.display()),
                "--remote-debugging-port=0",
                "about:blank",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {CHROMIUM}: {e}"));
        // Chromium writes the port it chose and the browser target's path here.
        let port_file = dir.join("DevToolsActivePort");
        let deadline = Instant::now() + Duration::from_secs(60);
        let (port, path) = loop {
            if let Ok(t) = std::fs::read_to_string(&port_file)
                && let Some((p, rest)) = t.split_once('\n')
                && rest.trim().starts_with("/devtools/")
            {
                break (p.trim().to_owned(), rest.trim().to_owned());
            }
            assert!(
                Instant::now() < deadline,
                "chromium did not write {}",
                port_file.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        let stream = TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let (ws, _) = tungstenite::client(format!("ws://127.0.0.1:{port}{path}"), stream).unwrap();
        let mut b = Browser {
            child,
            dir,
            ws,
            next_id: 0,
            session: String::new(),
            errors: Vec::new(),
            warnings: Vec::new(),
        };
        let target = b.call_browser("Target.createTarget", json!({ "url": "about:blank" }));
        let target_id = target["targetId"].as_str().unwrap().to_owned();
        let attached = b.call_browser(
            "Target.attachToTarget",
            json!({ "targetId": target_id, "flatten": true }),
        );
        b.session = attached["sessionId"].as_str().unwrap().to_owned();
        for m in [
            "Runtime.enable",
            "Log.enable",
            "Page.enable",
            "Performance.enable",
        ] {
            b.call(m, json!({}));
        }
        b.call(
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": width, "height": height, "deviceScaleFactor": 1, "mobile": false }),
        );
        b
    }

    fn call_browser(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params, None)
    }

    /// Calls `method` on the page and returns its result (panics on a protocol error).
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let s = self.session.clone();
        self.send(method, params, Some(&s))
    }

    fn send(&mut self, method: &str, params: Value, session: Option<&str>) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        self.ws.send(Message::text(msg.to_string())).unwrap();
        loop {
            let m = match self.ws.read() {
                Ok(Message::Text(t)) => t,
                Ok(_) => continue,
                Err(tungstenite::Error::Io(e))
                    if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
                {
                    panic!("no answer to {method} in 60 s")
                }
                Err(e) => panic!("DevTools socket failed during {method}: {e}"),
            };
            let v: Value = serde_json::from_str(&m).unwrap();
            if v["id"].as_u64() == Some(id) {
                if let Some(e) = v.get("error") {
                    panic!("{method} failed: {e}");
                }
                return v["result"].clone();
            }
            self.record_event(&v);
        }
    }

    fn record_event(&mut self, v: &Value) {
        let p = &v["params"];
        match v["method"].as_str() {
            Some("Runtime.consoleAPICalled") => {
                let text: Vec<String> = p["args"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|x| {
                                x["value"]
                                    .as_str()
                                    .map(str::to_owned)
                                    .or_else(|| x["description"].as_str().map(str::to_owned))
                                    .unwrap_or_else(|| x.to_string())
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let line = format!(
                    "console.{}: {}",
                    p["type"].as_str().unwrap_or("?"),
                    text.join(" ")
                );
                match p["type"].as_str() {
                    Some("error" | "assert") => self.errors.push(line),
                    Some("warning") => self.warnings.push(line),
                    _ => {}
                }
            }
            Some("Runtime.exceptionThrown") => {
                let d = &p["exceptionDetails"];
                self.errors.push(format!(
                    "exception: {} {}",
                    d["text"].as_str().unwrap_or(""),
                    d["exception"]["description"].as_str().unwrap_or("")
                ));
            }
            Some("Log.entryAdded") => {
                let e = &p["entry"];
                let line = format!(
                    "log {} ({}): {} {}",
                    e["level"].as_str().unwrap_or("?"),
                    e["source"].as_str().unwrap_or("?"),
                    e["text"].as_str().unwrap_or(""),
                    e["url"].as_str().unwrap_or("")
                );
                match e["level"].as_str() {
                    Some("error") => self.errors.push(line),
                    Some("warning") => self.warnings.push(line),
                    _ => {}
                }
            }
            _ => {}
        }
    }

    /// Loads `url`.
    pub fn navigate(&mut self, url: &str) {
        let r = self.call("Page.navigate", json!({ "url": url }));
        assert!(r.get("errorText").is_none(), "cannot load {url}: {r}");
    }

    /// Evaluates `expr` in the page and returns its value.
    pub fn eval(&mut self, expr: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({ "expression": expr, "returnByValue": true, "awaitPromise": true }),
        );
        if let Some(e) = r.get("exceptionDetails") {
            panic!("`{expr}` threw: {e}");
        }
        r["result"]["value"].clone()
    }

    /// Polls `expr` every 100 ms until it is truthy (its value) or `timeout` passes (panics
    /// with `what`).
    pub fn wait_for(&mut self, expr: &str, timeout: Duration, what: &str) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let v = self.eval(expr);
            let truthy = match &v {
                Value::Null => false,
                Value::Bool(b) => *b,
                Value::Number(n) => n.as_f64() != Some(0.0),
                Value::String(s) => !s.is_empty(),
                _ => true,
            };
            if truthy {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "timed out after {timeout:?} waiting for {what} (`{expr}`); errors: {:?}",
                self.errors
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Chromium's page metrics (`Performance.getMetrics`: cumulative durations in seconds,
    /// counts).
    pub fn metrics(&mut self) -> std::collections::BTreeMap<String, f64> {
        let r = self.call("Performance.getMetrics", json!({}));
        r["metrics"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|m| Some((m["name"].as_str()?.to_owned(), m["value"].as_f64()?)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Moves the mouse to viewport point (x, y).
    pub fn mouse_move(&mut self, x: f64, y: f64) {
        self.call(
            "Input.dispatchMouseEvent",
            json!({ "type": "mouseMoved", "x": x, "y": y }),
        );
    }

    /// Presses (`down`) or releases a key such as `ArrowRight` (`code` as the DOM names it,
    /// `vk` its Windows virtual key code).
    pub fn key(&mut self, key: &str, vk: u32, down: bool) {
        self.call(
            "Input.dispatchKeyEvent",
            json!({
                "type": if down { "rawKeyDown" } else { "keyUp" },
                "key": key, "code": key, "windowsVirtualKeyCode": vk,
            }),
        );
    }

    /// Saves a PNG of the page to `path`.
    pub fn screenshot(&mut self, path: &Path) {
        self.capture(path, json!({ "format": "png" }));
    }

    /// Saves a PNG of the `width` × `height` top of the page, scaled by `scale`.
    pub fn screenshot_scaled(&mut self, path: &Path, width: u32, height: u32, scale: f64) {
        self.capture(
            path,
            json!({ "format": "png", "clip": { "x": 0, "y": 0, "width": width, "height": height, "scale": scale } }),
        );
    }

    fn capture(&mut self, path: &Path, params: Value) {
        let r = self.call("Page.captureScreenshot", params);
        let png = base64_decode(r["data"].as_str().unwrap());
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(path, png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ask politely, then make sure: only the process this test started.
        self.next_id += 1;
        let _ = self.ws.send(Message::text(
            json!({ "id": self.next_id, "method": "Browser.close", "params": {} }).to_string(),
        ));
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Standard base64 (with padding) to bytes.
fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        }
    };
    let bytes: Vec<u8> = s.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for chunk in bytes.chunks(4) {
        let pad = chunk.iter().filter(|c| **c == b'=').count();
        let mut n = 0u32;
        for (k, c) in chunk.iter().enumerate() {
            n |= if *c == b'=' { 0 } else { val(*c) } << (18 - 6 * k);
        }
        let b = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&b[..3 - pad]);
    }
    out
}
