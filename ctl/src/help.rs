//! A check both command lines (`rocesw`, `rocectl`) run in their tests: every option and
//! argument of every subcommand says what it is for, so a newcomer's `-h` never shows a bare
//! flag.

/// The options and arguments without help text, as "command subcommand id".
pub fn undocumented_args(cmd: &clap::Command) -> Vec<String> {
    fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
        for a in cmd.get_arguments() {
            let id = a.get_id().as_str();
            if id != "help" && id != "version" && a.get_help().is_none() && a.get_long_help().is_none() {
                missing.push(format!("{path} {id}"));
            }
        }
        for sub in cmd.get_subcommands() {
            walk(sub, &format!("{path} {}", sub.get_name()), missing);
        }
    }
    let mut missing = Vec::new();
    walk(cmd, cmd.get_name(), &mut missing);
    missing
}
