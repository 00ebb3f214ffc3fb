//! `rocesw conform sonic`'s command line.

use anyhow::{anyhow, bail, Result};
use clap::Args;
use std::io::IsTerminal;
use std::path::PathBuf;

/// `rocesw conform sonic`.
#[derive(Args, Debug, Clone)]
pub struct SonicArgs {
    /// The switch's config_db.json (`show runningconfiguration all`, or /etc/sonic/config_db.json).
    /// Repeatable, and a directory stands for its *.json files (sorted by name): with more than
    /// one config, a directory, --shard or --output-dir the run is a fleet's, reported a line
    /// per switch with its failed checks (a config that cannot run fails its switch only).
    #[arg(long, value_name = "CONFIG_DB_JSON", required = true)]
    pub config: Vec<PathBuf>,
    /// The platform whose buffer rules apply, instead of DEVICE_METADATA's: spectrum1,
    /// spectrum2, spectrum3, spectrum4, tomahawk1, tomahawk2, tomahawk5 (and the others `rocectl sonic import
    /// --help` lists).
    #[arg(long, value_name = "NAME")]
    pub platform: Option<String>,
    /// The platform's pg_profile_lookup.ini, for lossless PGs whose profile SONiC computes.
    #[arg(long, value_name = "FILE")]
    pub pg_lookup: Option<PathBuf>,
    /// A sonic-mgmt qos_params.<asic>.yaml: the expected counts from it (the section for the
    /// source port's <speed>_<cable>) instead of computed from the config. NVIDIA's
    /// (qos_params.mellanox.yaml) holds no counts: they are computed from the config's
    /// profiles as sonic-mgmt's qos_param_generator.py does. `nvidia`: the bundled copy of it.
    #[arg(long, value_name = "FILE")]
    pub params: Option<PathBuf>,
    /// The topology of --params' file to take the counts from, as sonic-mgmt's testbed names
    /// it (`t1-64-lag`, `ft2-64`; `topo-` may be given or left out): the suite's numbers are
    /// measured per testbed, and one file holds several with different counts for the same
    /// <speed>_<cable>. Default: the first in the file with the source port's section
    /// (`topo-any` first). An unknown topology is refused with the file's topologies listed.
    #[arg(long, value_name = "TOPOLOGY", requires = "params")]
    pub topo: Option<String>,
    /// Run only these tests (comma-separated): DscpMappingPB, PFCtest, PFCXonTest,
    /// LossyQueueTest, WRRtest (wrr and wrr_chg), DscpEcnSend (ecn_1..4), HdrmPoolSizeTest, PGSharedWatermarkTest,
    /// PGHeadroomWatermarkTest, QSharedWatermarkTest, BufferPoolWatermarkTest, PfcWdTest.
    #[arg(long, value_name = "TESTS", value_delimiter = ',')]
    pub only: Vec<String>,
    /// The source port of the tests (a name such as Ethernet0, or an id). Default: the first.
    #[arg(long, value_name = "PORT")]
    pub src: Option<String>,
    /// The destination port (PFCXonTest adds the next two). Default: the second.
    #[arg(long, value_name = "PORT")]
    pub dst: Option<String>,
    /// Print how each expected count was derived from the file, and what the simulated switch
    /// logged during each test (kept out of the report otherwise).
    #[arg(long)]
    pub explain: bool,
    /// Print every step of every test, not only of the tests that failed.
    #[arg(long, short)]
    pub verbose: bool,
    /// The report as JSON on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also write the expected counts as a sonic-mgmt qos_params YAML: run a changed config
    /// with `--params FILE` to check it against this one's numbers.
    #[arg(long, value_name = "FILE")]
    pub write_params: Option<PathBuf>,
    /// Test shard I of N (I from 0) of the fleet: config k of the list goes to shard k modulo
    /// N. Writes DIR/conform.part.sIofN.json (--output-dir); `rocesw conform merge DIR
    /// --output-dir OUT` makes the fleet report of all N.
    #[arg(long, value_name = "I/N", value_parser = crate::parts::parse_spec)]
    pub shard: Option<(usize, usize)>,
    /// A fleet's directory: fleet.json and fleet.txt (every switch's pass or fail and failed
    /// checks), or with --shard this shard's part file; created if missing.
    #[arg(long, value_name = "DIR")]
    pub output_dir: Option<PathBuf>,
    /// Also write the results as JUnit XML (a testsuite per config, a testcase per test), for
    /// Jenkins, GitLab and other CI to show as tests.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
}

/// Runs the command: the report on stdout; true when every test passed (or was skipped).
pub fn run(args: SonicArgs) -> Result<bool> {
    let read = |p: &PathBuf| controlplane::files::read_text(p).map_err(|e| anyhow!(e));
    let configs = super::fleet::expand(&args.config)?;
    let fleet = configs.len() > 1
        || args.config.iter().any(|p| p.is_dir())
        || args.shard.is_some()
        || args.output_dir.is_some();
    if fleet && args.write_params.is_some() {
        bail!("--write-params writes one config's counts: give one --config file, without --shard or --output-dir");
    }
    if args.shard.is_some() && args.output_dir.is_none() {
        bail!("--shard needs --output-dir (the directory its part file goes to)");
    }
    let config = &configs[0];
    let json = if fleet { String::new() } else { read(config)? };
    let opts = super::Options {
        platform: args.platform.clone(),
        pg_lookup: match &args.pg_lookup {
            Some(p) => Some((read(p)?, p.display().to_string())),
            None => None,
        },
        params: match &args.params {
            // `nvidia`: sonic-mgmt's NVIDIA parameters, bundled, with the generator's counts.
            Some(p) if p.as_os_str() == "nvidia" && !p.exists() => Some((
                super::nvidia::MELLANOX_YAML.to_string(),
                "nvidia (sonic-mgmt qos_params.mellanox.yaml, bundled)".to_string(),
            )),
            Some(p) => Some((read(p)?, p.display().to_string())),
            None => None,
        },
        topo: args.topo.clone(),
        only: args.only.clone(),
        src: args.src.clone(),
        dst: args.dst.clone(),
        write_params: args.write_params.is_some(),
    };
    if fleet {
        return super::fleet::run(
            &configs,
            &opts,
            args.shard,
            args.output_dir.as_deref(),
            args.junit.as_deref(),
            args.json,
        );
    }
    if let Some(out) = &args.write_params {
        let mut inputs = vec![("the config".to_string(), config.as_path())];
        if let Some(p) = &args.params {
            inputs.push(("the parameters".to_string(), p.as_path()));
        }
        if let Some(p) = &args.pg_lookup {
            inputs.push(("the lookup table".to_string(), p.as_path()));
        }
        controlplane::files::refuse_aliased_outputs(&inputs, &[("--write-params".to_string(), out.as_path())])
            .map_err(|e| anyhow!(e))?;
    }
    let tty = std::io::stderr().is_terminal() && !args.json;
    let mut progress = |name: &str| {
        if tty {
            eprint!("\r\x1b[Krunning {name}…");
        }
    };
    let started = std::time::Instant::now();
    let (report, written) = super::run(&json, &config.display().to_string(), &opts, &mut progress)?;
    if let (Some(out), Some(text)) = (&args.write_params, written) {
        std::fs::write(out, text).map_err(|e| anyhow!("cannot write {}: {e}", out.display()))?;
    }
    if tty {
        eprint!("\r\x1b[K");
    }
    let text = if args.json {
        serde_json::to_string_pretty(&report)? + "\n"
    } else {
        let mut t = report.text(args.verbose, args.explain);
        t.push_str(&format!("took {:.1} s\n", started.elapsed().as_secs_f64()));
        t
    };
    crate::report::print_stdout(&text)?;
    if let Some(j) = &args.junit {
        let r = super::fleet::FleetReport::new(vec![super::fleet::SwitchResult::of(
            &config.display().to_string(),
            &report,
        )]);
        std::fs::write(j, r.junit()).map_err(|e| anyhow!("cannot write {}: {e}", j.display()))?;
    }
    Ok(report.passed())
}
