//! What admission is asked: the port a table is for ([`PortParams`]) and the connections'
//! requests, from `name=…,bw=…` specs, a file of them, or JSON.

use super::{L2_OVERHEAD_BYTES, MAX_FRAME_BYTES, MIN_FRAME_BYTES, NUM_VLS};
use serde::{Deserialize, Serialize};

fn default_min_frame() -> u32 {
    MIN_FRAME_BYTES
}

/// The port the table is for: what the model needs from it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortParams {
    /// Line rate, bits per second.
    pub speed_bps: u64,
    /// LimitOfHighPriority: 4 KiB units of high-priority bytes before a waiting low-priority
    /// frame goes; 255 = unbounded, 0 = one high frame at a time.
    pub high_limit: u8,
    /// The largest frame any VL sends on the port (stored bytes, no FCS).
    pub max_frame: u32,
    /// The smallest frame a high-priority VL sends: how many frames, each with its wire
    /// overhead, a visit can hold. 60 (a minimum Ethernet frame) unless the traffic is known.
    #[serde(default = "default_min_frame")]
    pub min_frame: u32,
    /// The VLs (queues) admission may give to sequences.
    pub vls: Vec<u8>,
}

impl PortParams {
    /// Every problem, each naming its field.
    pub fn check(&self) -> Result<(), String> {
        let mut problems = Vec::new();
        if self.speed_bps == 0 {
            problems.push("speed: must be above 0".to_string());
        }
        if !(MIN_FRAME_BYTES..=self.max_frame).contains(&self.min_frame) {
            problems.push(format!(
                "min frame: {} B is outside {MIN_FRAME_BYTES}..={} B (the largest frame)",
                self.min_frame, self.max_frame
            ));
        }
        if !(MIN_FRAME_BYTES..=MAX_FRAME_BYTES).contains(&self.max_frame) {
            problems.push(format!(
                "max frame: {} B is outside {MIN_FRAME_BYTES}..={MAX_FRAME_BYTES} B (a weight of 255 covers {MAX_FRAME_BYTES} B)",
                self.max_frame
            ));
        }
        if self.vls.is_empty() {
            problems.push("vls: none allowed".to_string());
        }
        for (n, vl) in self.vls.iter().enumerate() {
            if *vl >= NUM_VLS {
                problems.push(format!("vls: {vl} is not a VL (0..={})", NUM_VLS - 1));
            }
            if self.vls[..n].contains(vl) {
                problems.push(format!("vls: {vl} given twice"));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}

/// A connection asking for entries: a name, a mean rate, a latency or a distance, a frame size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Names the connection in refusals and in a later release; unique among the admitted.
    pub name: String,
    /// Mean bandwidth, bits of frames per second.
    pub bw_bps: u64,
    /// The latency it tolerates at this port, ns (exclusive with `distance`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<u64>,
    /// The largest distance between its entries it tolerates (exclusive with `latency_ns`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distance: Option<u32>,
    /// Its largest frame, stored bytes; `None`: the port's largest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame: Option<u32>,
    /// The VL it wants; `None`: its size's VL, or the first free allowed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vl: Option<u8>,
}

/// The keys a request is written with (`--request`, a requests file).
pub const REQUEST_KEYS: &str = "name, bw, latency or distance, mtu or frame, vl";

impl Request {
    /// From `key=value` pairs as written: `name=a,bw=2G,latency=20us,mtu=1024`.
    pub fn parse_spec(spec: &str) -> Result<Request, String> {
        let mut fields = Vec::new();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?} is not key=value (keys: {REQUEST_KEYS})"))?;
            fields.push((k.trim().to_string(), v.trim().to_string()));
        }
        Request::from_fields(&fields)
    }

    /// From (key, value) pairs; errors name the key.
    pub fn from_fields(fields: &[(String, String)]) -> Result<Request, String> {
        let mut seen: Vec<&str> = Vec::new();
        let (mut name, mut bw, mut latency, mut distance, mut frame, mut vl) = (None, None, None, None, None, None);
        for (k, v) in fields {
            if seen.contains(&k.as_str()) {
                return Err(format!("{k}: given twice"));
            }
            seen.push(k);
            let int = |max: u64| -> Result<u64, String> {
                v.parse::<u64>()
                    .ok()
                    .filter(|n| *n <= max)
                    .ok_or_else(|| format!("{k}: {v:?} is not a whole number up to {max}"))
            };
            match k.as_str() {
                "name" => {
                    if v.is_empty() || v.chars().any(|c| c.is_whitespace() || c == '=' || c == ',') {
                        return Err(format!("name: {v:?} must be non-empty, without spaces, '=' or ','"));
                    }
                    name = Some(v.clone());
                }
                "bw" => bw = Some(crate::units::parse_rate(v).map_err(|e| format!("bw: {e}"))?),
                "latency" => latency = Some(crate::units::parse_duration(v).map_err(|e| format!("latency: {e}"))?),
                "distance" => distance = Some(int(u64::from(u32::MAX))? as u32),
                "mtu" => {
                    if frame.is_some() {
                        return Err("mtu: give mtu or frame, not both".into());
                    }
                    frame = Some(int(u64::from(u32::MAX - L2_OVERHEAD_BYTES))? as u32 + L2_OVERHEAD_BYTES);
                }
                "frame" => {
                    if frame.is_some() {
                        return Err("frame: give mtu or frame, not both".into());
                    }
                    frame = Some(int(u64::from(u32::MAX))? as u32);
                }
                "vl" => vl = Some(int(u64::from(NUM_VLS - 1))? as u8),
                _ => return Err(format!("{k}: not a request key (keys: {REQUEST_KEYS})")),
            }
        }
        let name = name.ok_or("name: missing")?;
        let named = |e: String| format!("{name}: {e}");
        let bw_bps = bw.ok_or_else(|| named("bw: missing".into()))?;
        if latency.is_some() == distance.is_some() {
            return Err(named("give latency or distance (one of them)".into()));
        }
        Ok(Request {
            name,
            bw_bps,
            latency_ns: latency,
            distance,
            frame,
            vl,
        })
    }

    /// The request written back as a spec.
    pub fn spec(&self) -> String {
        let mut s = format!("name={},bw={}", self.name, crate::units::format_rate(self.bw_bps));
        if let Some(l) = self.latency_ns {
            s += &format!(",latency={}", crate::units::format_duration(l));
        }
        if let Some(d) = self.distance {
            s += &format!(",distance={d}");
        }
        if let Some(f) = self.frame {
            s += &format!(",frame={f}");
        }
        if let Some(v) = self.vl {
            s += &format!(",vl={v}");
        }
        s
    }
}

/// Requests from a file: TOML (`[[request]]` tables) or, with `json`, a JSON array of objects
/// (or `{"request": [...]}`); the keys are those of `--request`. Errors name the request.
pub fn parse_requests(text: &str, json: bool) -> Result<Vec<Request>, String> {
    let list: Vec<Vec<(String, String)>> = if json {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let arr = match &v {
            serde_json::Value::Array(a) => a,
            serde_json::Value::Object(o) if o.len() == 1 && o.contains_key("request") => {
                o["request"].as_array().ok_or("request: not an array")?
            }
            _ => return Err("expected an array of requests, or {\"request\": [...]}".into()),
        };
        arr.iter()
            .enumerate()
            .map(|(i, r)| {
                let o = r.as_object().ok_or(format!("request {}: not an object", i + 1))?;
                o.iter()
                    .map(|(k, v)| match v {
                        serde_json::Value::String(s) => Ok((k.clone(), s.clone())),
                        serde_json::Value::Number(n) => Ok((k.clone(), n.to_string())),
                        _ => Err(format!("request {}: {k}: not a string or number", i + 1)),
                    })
                    .collect()
            })
            .collect::<Result<_, String>>()?
    } else {
        let t: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| e.to_string().trim_end().to_string())?;
        if let Some(k) = t.keys().find(|k| *k != "request") {
            return Err(format!("{k}: not a key of a requests file (write [[request]] tables)"));
        }
        let arr = match t.get("request") {
            None => return Ok(Vec::new()),
            Some(toml::Value::Array(a)) => a,
            Some(_) => return Err("request: write [[request]] tables".into()),
        };
        arr.iter()
            .enumerate()
            .map(|(i, r)| {
                let o = r.as_table().ok_or(format!("request {}: not a table", i + 1))?;
                o.iter()
                    .map(|(k, v)| match v {
                        toml::Value::String(s) => Ok((k.clone(), s.clone())),
                        toml::Value::Integer(n) => Ok((k.clone(), n.to_string())),
                        _ => Err(format!("request {}: {k}: not a string or integer", i + 1)),
                    })
                    .collect()
            })
            .collect::<Result<_, String>>()?
    };
    list.iter()
        .enumerate()
        .map(|(i, f)| Request::from_fields(f).map_err(|e| format!("request {}: {e}", i + 1)))
        .collect()
}
