//! The page, embedded in the binary: hand-written HTML, JavaScript and CSS, no framework,
//! no build step, nothing loaded from elsewhere.

/// `index.html`.
pub const INDEX_HTML: &str = include_str!("../assets/index.html");
/// `app.js`: the WebSocket client, the protocol decoder, the map, tables and charts.
pub const APP_JS: &str = include_str!("../assets/app.js");
/// `style.css`.
pub const STYLE_CSS: &str = include_str!("../assets/style.css");
