//! `rocectl sonic import` and `export`: a SONiC config_db.json to rocesw's TOML and tuned values
//! back as a JSON Patch (`controlplane::sonic`). Offline, but for `export --running`, which asks
//! the switch for its running config.

use crate::cli::{Sonic, SonicArgs};
use controlplane::files;
use controlplane::protocol::{self, Endpoint, Op};
use controlplane::sonic::export::{export, export_fragment};
use controlplane::sonic::{import_text, ImportOptions};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

/// What `sonic export` exports: a config file, a fragment, or the running switch's config.
enum Source<'a> {
    Config(&'a Path),
    Fragment(&'a Path),
    Running(&'a Endpoint),
}

/// Runs a `rocectl sonic` command: 0 done, 1 a change the file cannot say, 2 bad input.
/// `targets`: the switches the connection options name (used by `export --running` only).
pub fn run(cmd: Sonic, targets: &[(String, Endpoint)]) -> ExitCode {
    let result = match cmd {
        Sonic::Import { file, output, sonic } => import(&file, &output, &sonic),
        Sonic::Export {
            file,
            config,
            fragment,
            running,
            connection,
            output,
            sonic,
        } => {
            let source = match (running, config.as_deref(), fragment.as_deref(), targets) {
                (true, _, _, [(_, one)]) => Ok(Source::Running(one)),
                (true, _, _, many) => Err(format!("--running exports one switch at a time (got {})", many.len())),
                (false, _, _, _) if !connection.given().is_empty() => Err(format!(
                    "{} name a switch, which only --running asks",
                    connection.given().join(", ")
                )),
                (false, Some(c), _, _) => Ok(Source::Config(c)),
                (false, None, Some(f), _) => Ok(Source::Fragment(f)),
                (false, None, None, _) => Err("give --running, --config or --fragment".into()),
            };
            source.and_then(|s| export_cmd(&file, s, output.as_deref(), &sonic))
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rocectl: {e}");
            ExitCode::from(2)
        }
    }
}

pub(crate) fn options(file: &Path, args: &SonicArgs) -> Result<ImportOptions, String> {
    let pg_lookup = match &args.pg_lookup {
        Some(p) => Some((files::read_text(p)?, p.display().to_string())),
        None => None,
    };
    Ok(ImportOptions {
        platform: args.platform.clone(),
        pg_lookup,
        source: Some(file.display().to_string()),
    })
}

fn import(file: &Path, output: &Path, args: &SonicArgs) -> Result<ExitCode, String> {
    let mut inputs = vec![("config_db.json".to_string(), file)];
    if let Some(l) = &args.pg_lookup {
        inputs.push(("lookup table".to_string(), l.as_path()));
    }
    let to_stdout = output == Path::new("-");
    if !to_stdout {
        files::refuse_aliased_outputs(&inputs, &[("output".to_string(), output)])?;
    }
    let text = files::read_text(file)?;
    let opts = options(file, args)?;
    let imported = import_text(&text, &opts).map_err(|e| format!("{}:\n  {}", file.display(), e.join("\n  ")))?;
    // What runs is what was written: the TOML must load (it always should; say so if not).
    let loaded = controlplane::load_str(&imported.toml)
        .map_err(|e| format!("{}: imported, but the config does not validate:\n{e}", file.display()))?;
    write_out(output, imported.toml.as_bytes())?;
    for n in &imported.notes {
        eprintln!("note: {n}");
    }
    for w in &loaded.warnings {
        eprintln!("warning: {}", crate::buffer::with_origin(&imported.toml, w));
    }
    if !to_stdout {
        eprintln!(
            "{}: {} ports, platform {}, written to {}",
            file.display(),
            imported.ports.len(),
            imported.platform.name,
            output.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn export_cmd(file: &Path, source: Source, output: Option<&Path>, args: &SonicArgs) -> Result<ExitCode, String> {
    if let Some(out) = output {
        let mut inputs = vec![("config_db.json".to_string(), file)];
        match &source {
            Source::Config(c) => inputs.push(("config".to_string(), c)),
            Source::Fragment(f) => inputs.push(("fragment".to_string(), f)),
            Source::Running(_) => {}
        }
        files::refuse_aliased_outputs(&inputs, &[("patch".to_string(), out)])?;
    }
    let text = files::read_text(file)?;
    let opts = options(file, args)?;
    let exported = match source {
        Source::Config(c) => {
            let target = controlplane::load_file(c)
                .map_err(|e| format!("{}:\n{e}", c.display()))?
                .config;
            export(&text, &opts, &target)
        }
        Source::Fragment(f) => export_fragment(&text, &opts, &files::read_text(f)?),
        Source::Running(s) => {
            let mut c = crate::target::connect(s)?;
            let running: protocol::ConfigData = c.call_as(Op::GetConfig).map_err(crate::target::err)?;
            let target = controlplane::load_str(&running.toml)
                .map_err(|e| {
                    format!(
                        "the running config (version {}) does not load here:\n{e}",
                        running.version
                    )
                })?
                .config;
            export(&text, &opts, &target)
        }
    };
    match exported {
        Ok(e) => {
            let patch = serde_json::to_string_pretty(&e.patch).map_err(|e| e.to_string())? + "\n";
            match output {
                Some(out) => write_out(out, patch.as_bytes())?,
                None => write_out(Path::new("-"), patch.as_bytes())?,
            }
            for n in &e.notes {
                eprintln!("note: {n}");
            }
            if e.changes.is_empty() {
                eprintln!("no change: the config runs the file's values");
            }
            for c in &e.changes {
                eprintln!("{c}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(problems) => {
            for p in problems {
                eprintln!("rocectl: {p}");
            }
            Ok(ExitCode::from(1))
        }
    }
}

/// Writes `bytes` to `path` (- for standard output) whole: a temporary file beside it renamed
/// over it, so a reader never sees half of it; a broken pipe on standard output ends quietly.
fn write_out(path: &Path, bytes: &[u8]) -> Result<(), String> {
    if path == Path::new("-") {
        let mut out = std::io::stdout().lock();
        return match out.write_all(bytes).and_then(|()| out.flush()) {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(format!("standard output: {e}")),
            _ => Ok(()),
        };
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    tmp.write_all(bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    tmp.persist(path)
        .map_err(|e| format!("{}: {}", path.display(), e.error))?;
    Ok(())
}
