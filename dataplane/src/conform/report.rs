//! What `rocesw conform` reports: per test and step, what was sent, what was expected, what was
//! seen, and whether it held; as a test runner's text or as JSON.

use serde::Serialize;
use std::fmt::Write;

/// One step of a test: the traffic or action, and each check made after it.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// What was done (`send 1434 frames Ethernet0 → Ethernet8, DSCP 3, 64 B`).
    pub action: String,
    /// The checks made after it.
    pub checks: Vec<Check>,
}

/// One check: what the procedure expects and what the switch's counters said.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// What is expected (`PFC frames on priority 3: unchanged`).
    pub expected: String,
    /// What was seen (`0 → 0`).
    pub seen: String,
    /// Whether it held.
    pub ok: bool,
}

/// One test of the suite.
#[derive(Debug, Clone, Serialize)]
pub struct TestResult {
    /// The sonic-mgmt test and its parameter set (`PFCtest[xoff_1]`).
    pub name: String,
    /// `passed`, `failed`, `skipped` or `error`.
    pub outcome: Outcome,
    /// Why it was skipped, or what went wrong before a check could be made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// How each expected count was derived from the config (`--explain`).
    pub explain: Vec<String>,
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// What the simulated switch logged while the test ran (warnings and errors, each
    /// distinct line once with its count): kept here, not in the process's log, so that a
    /// storm the test provokes does not print in the middle of the report.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub log: Vec<String>,
}

/// How a test ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Every check held.
    Passed,
    /// A check did not hold.
    Failed,
    /// The config does not have what the test needs (e.g. no shared headroom pool).
    Skipped,
    /// The test could not run (a port or class the config lacks).
    Error,
}

impl TestResult {
    /// A test with no step yet.
    pub fn new(name: impl Into<String>) -> TestResult {
        TestResult {
            name: name.into(),
            outcome: Outcome::Passed,
            reason: None,
            explain: Vec::new(),
            steps: Vec::new(),
            log: Vec::new(),
        }
    }

    /// Starts a step.
    pub fn step(&mut self, action: impl Into<String>) {
        self.steps.push(Step {
            action: action.into(),
            checks: Vec::new(),
        });
    }

    /// Records a check of the current step; a failed one fails the test.
    pub fn check(&mut self, ok: bool, expected: impl Into<String>, seen: impl Into<String>) {
        if !ok && self.outcome == Outcome::Passed {
            self.outcome = Outcome::Failed;
        }
        let check = Check {
            expected: expected.into(),
            seen: seen.into(),
            ok,
        };
        match self.steps.last_mut() {
            Some(s) => s.checks.push(check),
            None => self.steps.push(Step {
                action: "before any traffic".into(),
                checks: vec![check],
            }),
        }
    }

    /// Ends the test as skipped.
    pub fn skip(mut self, why: impl Into<String>) -> TestResult {
        self.outcome = Outcome::Skipped;
        self.reason = Some(why.into());
        self
    }

    /// Ends the test with an error (it could not run).
    pub fn error(mut self, why: impl Into<String>) -> TestResult {
        self.outcome = Outcome::Error;
        self.reason = Some(why.into());
        self
    }
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct SuiteReport {
    /// The config that was tested.
    pub config: String,
    /// The platform whose rules applied.
    pub platform: String,
    /// Where the expected counts came from (`computed from the config` or a yaml file).
    pub params: String,
    /// The tests, in the order they ran.
    pub tests: Vec<TestResult>,
    /// Virtual time the suite took, ns.
    pub virtual_ns: u64,
}

impl SuiteReport {
    /// Whether no test failed or could not run.
    pub fn passed(&self) -> bool {
        self.tests
            .iter()
            .all(|t| matches!(t.outcome, Outcome::Passed | Outcome::Skipped))
    }

    /// The report as a test runner prints it: a line per test, the steps of every test that
    /// did not pass (and of all with `verbose`), the derivations with `explain`.
    pub fn text(&self, verbose: bool, explain: bool) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "rocesw conform sonic: {} (platform {}; expected counts {})",
            self.config, self.platform, self.params
        );
        for t in &self.tests {
            let tag = match t.outcome {
                Outcome::Passed => "PASS",
                Outcome::Failed => "FAIL",
                Outcome::Skipped => "SKIP",
                Outcome::Error => "ERROR",
            };
            let _ = writeln!(o, "{tag:<5} {}", t.name);
            if let Some(r) = &t.reason {
                let _ = writeln!(o, "      {r}");
            }
            if explain {
                for e in &t.explain {
                    let _ = writeln!(o, "      = {e}");
                }
            }
            if explain || verbose {
                for l in &t.log {
                    let _ = writeln!(o, "      switch log: {l}");
                }
            }
            if verbose || t.outcome == Outcome::Failed {
                for (i, s) in t.steps.iter().enumerate() {
                    let _ = writeln!(o, "      {}. {}", i + 1, s.action);
                    for c in &s.checks {
                        let _ = writeln!(
                            o,
                            "         {} expected {}; seen {}",
                            if c.ok { "ok " } else { "NOT" },
                            c.expected,
                            c.seen
                        );
                    }
                }
            }
        }
        let count = |x: Outcome| self.tests.iter().filter(|t| t.outcome == x).count();
        let _ = writeln!(
            o,
            "{} passed, {} failed, {} skipped, {} errors ({:.3} s of virtual time)",
            count(Outcome::Passed),
            count(Outcome::Failed),
            count(Outcome::Skipped),
            count(Outcome::Error),
            self.virtual_ns as f64 / 1e9
        );
        o
    }
}
