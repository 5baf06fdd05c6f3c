// Which secret names may become environment variables of a program on someone else's
// machine (`run`) or be set by a shell that sources an exported .env file.
//
// Why an allow-rule: runtimes, shells, linkers, VCS tools and package managers read
// hundreds of variables that decide which code runs (GIT_CONFIG_KEY_0=core.fsmonitor,
// GIT_ASKPASS, LD_PRELOAD, NODE_OPTIONS, PAGER, EDITOR, HOME, XDG_CONFIG_HOME, ...), and new
// ones appear with every release. A list of bad names is never finished, and every name it
// misses lets anyone who may create a secret run code on every machine that uses it. So a
// name passes only when it looks like an application's own setting; anything else needs
// the consent of the person who runs the command (`--allow-env KEY`). It is a heuristic
// that leans to refusing: a name it lets through can still be read by some tool somewhere,
// which is why the README says to run only what you trust. The rule is in the README
// (The CLI, "run"); keep the two in step.

/** Upper-case words of letters and digits joined by underscores, starting with a letter. */
const SHAPE = /^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*$/;

/**
 * One-word names are mostly read by shells and tools (PATH, HOME, SHELL, PAGER, EDITOR,
 * CLASSPATH, GOFLAGS, RUSTFLAGS, PYTHONPATH, KUBECONFIG...). These two are the platform
 * conventions for an application's own listening port and debug logging; neither names
 * code to load.
 */
const SINGLE_WORD_SETTINGS = new Set(["PORT", "DEBUG"]);

/**
 * In a reserved namespace but only an application setting: Node.js itself does not read
 * NODE_ENV; frameworks use it to pick production behaviour.
 */
const NAMESPACE_EXCEPTIONS = new Set(["NODE_ENV"]);

/**
 * Leading words (one or more) of names that a shell, the C library, a runtime, a package
 * manager, a VCS or a build or deployment tool reads. A name equal to one of these or
 * starting with it and an underscore is refused.
 */
const RESERVED_NAMESPACES = new Set([
  // shells, terminals, the C library and the dynamic linker
  "BASH",
  "ZSH",
  "KSH",
  "FISH",
  "SHELL",
  "PROMPT",
  "POSIXLY",
  "HIST",
  "XDG",
  "LC",
  "LANG",
  "LESS",
  "MAN",
  "TERM",
  "TERMINFO",
  "INPUTRC",
  "READLINE",
  "TMUX",
  "SCREEN",
  "VIM",
  "NVIM",
  "EMACS",
  "LD",
  "DYLD",
  "GCONV",
  "MALLOC",
  "GLIBC",
  "GLIBCXX",
  "LIBC",
  "SUDO",
  "DOAS",
  "PAM",
  "SYSTEMD",
  "DBUS",
  "WAYLAND",
  "DISPLAY",
  "DESKTOP",
  // TLS, proxies and network tools that other programs call
  "OPENSSL",
  "SSL",
  "GNUTLS",
  "NSS",
  "CURL",
  "WGET",
  "REQUESTS",
  "KRB5",
  "GPG",
  "GNUPG",
  "SSH",
  "RSYNC",
  // version control
  "GIT",
  "GH",
  "SVN",
  "HG",
  "CVS",
  "JJ",
  // compilers and build tools (USE_BAZEL_VERSION=fork/x makes bazelisk fetch and run a fork)
  "BAZEL",
  "BAZELISK",
  "USE_BAZEL",
  "GCC",
  "CC",
  "CXX",
  "CPP",
  "CLANG",
  "LLVM",
  "CCACHE",
  "DISTCC",
  "MAKE",
  "CMAKE",
  "NINJA",
  "MESON",
  "PKG",
  "AUTOCONF",
  "GO",
  "CGO",
  "RUSTC",
  "RUSTDOC",
  "RUSTUP",
  "CARGO",
  "ZIG",
  "SWIFT",
  // JavaScript
  "NODE",
  "NPM",
  "NPX",
  "YARN",
  "PNPM",
  "COREPACK",
  "NVM",
  "VOLTA",
  "FNM",
  "DENO",
  "BUN",
  "TS",
  "TSX",
  "BABEL",
  "ELECTRON",
  "VSCODE",
  // Python, Perl, Ruby, PHP, Lua, R, Erlang and friends
  "PYTHON",
  "PIP",
  "PIPX",
  "PIPENV",
  "UV",
  "POETRY",
  "PDM",
  "CONDA",
  "MAMBA",
  "VIRTUAL",
  "PYENV",
  "TOX",
  "IPYTHON",
  "JUPYTER",
  "PERL",
  "PERL5",
  "CPAN",
  "RUBY",
  "GEM",
  "BUNDLE",
  "BUNDLER",
  "RBENV",
  "RVM",
  "PHP",
  "COMPOSER",
  "LUA",
  "R",
  "JULIA",
  "ERL",
  "ELIXIR",
  "MIX",
  "HEX",
  "GHC",
  "CABAL",
  "OCAML",
  "OPAM",
  // JVM and .NET
  "JAVA",
  "JDK",
  "JRE",
  "JVM",
  "MAVEN",
  "MVN",
  "GRADLE",
  "ANT",
  "SBT",
  "KOTLIN",
  "SCALA",
  "DOTNET",
  "CORECLR",
  "COMPLUS",
  "NUGET",
  "MSBUILD",
  "MONO",
  "ASPNETCORE",
  // operating system packages, containers, deployment tools
  "APT",
  "DPKG",
  "DEBCONF",
  "RPM",
  "YUM",
  "DNF",
  "HOMEBREW",
  "NIX",
  "DOCKER",
  "BUILDKIT",
  "COMPOSE",
  "PODMAN",
  "CONTAINERS",
  "BUILDAH",
  "KUBE",
  "KUBECTL",
  "HELM",
  "TF",
  "TERRAFORM",
  "PULUMI",
  "ANSIBLE",
  "VAGRANT",
  "PACKER",
  "CLOUDSDK",
  "GCLOUD",
  // desktop and graphics libraries that load modules or drivers by name (GIO_MODULE_DIR,
  // GTK_IM_MODULE_FILE, VK_ICD_FILENAMES, OCL_ICD_FILENAMES, GST_PLUGIN_SCANNER, LIBVA_DRIVER_NAME)
  "GTK",
  "GDK",
  "GIO",
  "GST",
  "GSETTINGS",
  "QT",
  "VK",
  "OCL",
  "LIBVA",
  "VDPAU",
  "MESA",
  "FONTCONFIG",
  // .NET's profiler (COR_PROFILER loads a library), build-time cross compilers, ORMs and
  // servers that run a binary or a file the variable names
  "COR",
  "CROSS",
  "PRISMA",
  "CATALINA",
  "SPRING",
  "FLASK",
  "DJANGO",
  "SASS",
  "CHROME",
  "CHROMEDRIVER",
  "CHROMIUM",
  "PUPPETEER",
  "PLAYWRIGHT",
  "CYPRESS",
  "RES",
  "HOSTALIASES",
  "CONFIG",
  // this CLI: a nested `secrets-server run` must not take its settings from a secret
  "SECRETS_SERVER",
]);

/**
 * Last words (or last two words) of names that say where code, a program, a tool's
 * configuration, arguments or trust comes from, whatever the namespace: GCONV_PATH,
 * JAVA_HOME, MAVEN_OPTS, DOTNET_STARTUP_HOOKS, SUDO_ASKPASS, GIT_EDITOR, CONFIG_SHELL,
 * LD_PRELOAD, PROMPT_COMMAND, TF_CLI_ARGS, AWS_CONFIG_FILE (credential_process runs a
 * command), HTTPS_PROXY.
 */
const RESERVED_ENDINGS = new Set([
  "PATH",
  "PATHS",
  "HOME",
  "ROOT",
  "OPT",
  "OPTS",
  "OPTIONS",
  "ARGS",
  "ARGV",
  "HOOK",
  "HOOKS",
  "ASKPASS",
  "EDITOR",
  "VISUAL",
  "PAGER",
  "BROWSER",
  "SHELL",
  "RSH",
  "PRELOAD",
  "COMMAND",
  "CMD",
  "PROGRAM",
  "EXEC",
  "EXECUTABLE",
  "INTERPRETER",
  "LOADER",
  "LIB",
  "LIBS",
  "MODULE",
  "MODULES",
  "PLUGIN",
  "PLUGINS",
  "HELPER",
  "INIT",
  "STARTUP",
  "RC",
  "CONFIG",
  "CONF",
  "CFLAGS",
  "CXXFLAGS",
  "CPPFLAGS",
  "LDFLAGS",
  "PROXY",
  "CONFIG_FILE",
  "CREDENTIALS_FILE",
  "APPLICATION_CREDENTIALS",
  "CA_BUNDLE",
  "CA_CERTS",
  "CERT_FILE",
  "CERT_DIR",
  "BIN",
  "BINARY",
  "LIBRARY",
  "FILENAMES",
  "MODULE_DIR",
  "MODULE_FILE",
  "PLUGIN_DIR",
  "DRIVER_NAME",
  "SCANNER",
  // Compound words of the same kinds: PYTEST_ADDOPTS, BORG_PASSCOMMAND (a command borg
  // runs), HADOOP_CLASSPATH, SPARK_CONF_DIR (whose *-env.sh is sourced), JUPYTER_CONFIG_DIR
  // (whose *_config.py is run), SASS_BINARY_CDNURL (where a program is downloaded from),
  // SDL_DYNAMIC_API (a library to load).
  "ADDOPTS",
  "PASSCOMMAND",
  "CLASSPATH",
  "CONF_DIR",
  "CONFIG_DIR",
  "CDNURL",
  "DYNAMIC_API",
]);

/**
 * Whether the key is one of `namespaces` or starts with one and an underscore, or ends
 * with an underscore and one of `endings`. By the key's own underscores, not by every
 * entry: an export checks a thousand keys, and a loop over some 300 names with a string
 * built for each took about 5 ms of it.
 */
function matchesWords(key: string, namespaces: Set<string>, endings: Set<string>): boolean {
  if (namespaces.has(key)) return true;
  for (let at = key.indexOf("_"); at !== -1; at = key.indexOf("_", at + 1)) {
    if (namespaces.has(key.slice(0, at)) || endings.has(key.slice(at + 1))) return true;
  }
  return false;
}

/**
 * Whether `key` looks like an application's own setting, so a secret of that name may be
 * put in a command's environment without the consent of whoever runs it.
 */
export function isAppSettingName(key: string): boolean {
  if (!SHAPE.test(key)) return false;
  if (NAMESPACE_EXCEPTIONS.has(key)) return true;
  if (!key.includes("_")) return SINGLE_WORD_SETTINGS.has(key);
  return !matchesWords(key, RESERVED_NAMESPACES, RESERVED_ENDINGS);
}

/** Names in a comma-separated list, such as SECRETS_SERVER_ALLOW_ENV. */
export function parseNameList(text: string | undefined): string[] {
  return (text ?? "")
    .split(",")
    .map((name) => name.trim())
    .filter(Boolean);
}

/**
 * Names zsh gives a type of its own, in every shell or once a common module is loaded: an
 * integer or a float, whose assignment is evaluated as arithmetic (so `TRY_BLOCK_ERROR=
 * 'a[$(cmd)1]'` in a sourced file runs cmd, and "abc" becomes 0), or a single character.
 * They pass isAppSettingName; taken from the environment they are not evaluated, so `run`
 * may pass them, but no file a shell sources may assign them.
 */
const SHELL_TYPED_NAMES = new Set([
  "TRY_BLOCK_ERROR",
  "TRY_BLOCK_INTERRUPT",
  "KEYBOARD_HACK",
  // One-word ones: refused by isAppSettingName, but --allow-env may name them.
  "ARGC",
  "COLUMNS",
  "DIRSTACKSIZE",
  "EGID",
  "EPOCHREALTIME",
  "EPOCHSECONDS",
  "ERRNO",
  "EUID",
  "FUNCNEST",
  "GID",
  "HISTCMD",
  "HISTSIZE",
  "KEYTIMEOUT",
  "LINENO",
  "LINES",
  "LISTMAX",
  "LOGCHECK",
  "MAILCHECK",
  "OPTIND",
  "PERIOD",
  "PPID",
  "RANDOM",
  "SAVEHIST",
  "SECONDS",
  "SHLVL",
  "TMOUT",
  "TTYIDLE",
  "UID",
]);

/** Also zsh's line editor's namespace (ZLE_RPROMPT_INDENT is an integer) and zsh/curses' (ZCURSES_COLORS). */
export function isShellTypedName(key: string): boolean {
  return SHELL_TYPED_NAMES.has(key) || key.startsWith("ZLE_") || key.startsWith("ZCURSES_");
}
