"""The known-safe options of every command the policy can allow (read by ``options.py``).

Spec text, one token per option, spelled exactly as the tool documents it:
``-l`` / ``--all`` take no value; ``-n=`` / ``--lines=`` take a value (attached or the next word);
``--color=?`` takes a value only when attached; ``--arg=2`` takes two words; ``-NUM`` allows ``-5``;
``-o=W`` takes a path the tool WRITES (judged as a write); ``--cov-report=W:`` a value whose part
after ``:`` is a path written (``html:DIR``); ``-c=C`` a configuration file, which must be inside the
workspace (configurations load plugins); ``SINGLE`` means ``-name``/``--name`` long options without
clusters (go, find); ``STOP`` means the first operand ends the options; ``ANY``: every option is
harmless and none opens a file, so a word built at run time may stand anywhere (``seq 1 $N``).
``--help``/``--version`` are added to every list. An option missing here asks — that is the point:
a list only grows by someone reading the tool's manual and deciding the option is harmless.
Options that run programs, load code, read file names from a file or point the tool at other
configuration are left out on purpose (``sort --compress-program``, ``rg --pre``, ``grep -f``
is kept since it reads patterns, but ``du --files0-from`` is not).
"""

from __future__ import annotations

from keel.policy.shell.git import LOCAL_OPTIONS
from keel.policy.shell.optlists_git import GIT_LISTS as _GIT

_TEXT_IN = "-z --zero-terminated"
_GREP = ("-E -F -G -P -e= --regexp= -f= --file= -i -y --ignore-case --no-ignore-case -v --invert-match -w "
         "--word-regexp -x --line-regexp -c --count --color=? --colour=? -L --files-without-match -l "
         "--files-with-matches -m= --max-count= -o --only-matching -q --quiet --silent -s --no-messages -b "
         "--byte-offset -H --with-filename -h --no-filename --label= -n --line-number -T --initial-tab -Z --null "
         "-A= --after-context= -B= --before-context= -C= --context= -NUM -a --text --binary-files= -I -D= "
         "--devices= -d= --directories= --exclude= --exclude-dir= --include= -r --recursive -R "
         "--dereference-recursive --line-buffered -U --binary -z --null-data --extended-regexp --fixed-strings "
         "--basic-regexp --perl-regexp --no-ignore-case")
_LS = ("-a --all -A --almost-all --author -b --escape --block-size= -B --ignore-backups -c -C --color=? -d "
       "--directory -D --dired -f -F --classify=? --file-type --format= --full-time -g --group-directories-first "
       "-G --no-group -h --human-readable --si -H --dereference-command-line "
       "--dereference-command-line-symlink-to-dir --hide= --hyperlink=? --indicator-style= -i --inode -I= "
       "--ignore= -k --kibibytes -l -L --dereference -m -n --numeric-uid-gid -N --literal -o -p -q "
       "--hide-control-chars --show-control-chars -Q --quote-name --quoting-style= -r --reverse -R --recursive "
       "-s --size -S --sort= --time= --time-style= -t -T= --tabsize= -u -U -v -w= --width= -x -X -Z --context "
       "--zero -1")
_HEAD_TAIL = "-c= --bytes= -n= --lines= -q --quiet --silent -v --verbose -z --zero-terminated -NUM"
_DIFF = ("-q --brief -s --report-identical-files -c -C= --context=? -u -U= --unified=? -e --ed -n --rcs -y "
         "--side-by-side -W= --width= --left-column --suppress-common-lines -p --show-c-function -F= "
         "--show-function-line= --label= --expand-tabs -t -T --initial-tab --tabsize= --suppress-blank-empty "
         "-l --paginate -r --recursive --no-dereference -N --new-file --unidirectional-new-file --ignore-file-name-case "
         "--no-ignore-file-name-case -x= --exclude= -S= --starting-file= -i --ignore-case -E --ignore-tab-expansion "
         "-Z --ignore-trailing-space -b --ignore-space-change -w --ignore-all-space -B --ignore-blank-lines -I= "
         "--ignore-matching-lines= -a --text --strip-trailing-cr -D= --ifdef= --line-format= --old-line-format= "
         "--new-line-format= --unchanged-line-format= --old-group-format= --new-group-format= "
         "--changed-group-format= --unchanged-group-format= -d --minimal --horizon-lines= --speed-large-files "
         "--color=? --palette= --normal --from-file= --to-file=")
_SUMS = "-b --binary -c --check -t --text --tag --zero -z --ignore-missing --quiet --status --strict -w --warn"

_PYTEST = ("-k= -m= -x --exitfirst --maxfail= -v --verbose -q --quiet -vv -vvv -qq -r= -l --showlocals "
           "--tb= --show-capture= --full-trace --color= --code-highlight= -s --capture= -p= --co --collect-only "
           "--lf --last-failed --ff --failed-first --nf --new-first --sw --stepwise --sw-skip --stepwise-skip "
           "--cache-show=? --cache-clear --durations= --durations-min= --strict-markers --strict-config "
           "--strict -c= --config-file= --rootdir= --confcutdir= --noconftest --ignore= --ignore-glob= "
           "--deselect= --continue-on-collection-errors --pyargs --import-mode= --doctest-modules "
           "--doctest-glob= --doctest-continue-on-failure --doctest-report= --doctest-ignore-import-errors "
           "-o= --override-ini= -W= --pythonwarnings= --disable-warnings --disable-pytest-warnings --runxfail "
           "--basetemp= --junitxml=W --junit-xml=W --junit-prefix= --report-log=W --result-log=W --log-file=W "
           "--log-level= --log-format= --log-date-format= --log-cli-level= --log-cli-format= "
           "--log-cli-date-format= --log-file-level= --log-file-format= --log-file-date-format= --log-auto-indent= "
           "--log-disable= --show-fixtures --fixtures --fixtures-per-test --markers --version -V -h --help "
           "--setup-only --setup-show --setup-plan --no-header --no-summary --no-showlocals -n= --numprocesses= "
           "--dist= --maxprocesses= --timeout= --timeout-method= --cov=? --cov-report=W: --cov-fail-under= "
           "--cov-branch --no-cov --cov-append --cov-config=C --asyncio-mode= --randomly-seed= "
           "--debug=W --verbosity=")
_MYPY = ("--strict --ignore-missing-imports --follow-imports= --python-version= --platform= "
         "--disallow-untyped-defs --disallow-incomplete-defs --check-untyped-defs --no-implicit-optional "
         "--warn-unused-ignores --warn-redundant-casts --warn-return-any --no-error-summary --show-error-codes "
         "--hide-error-codes --show-column-numbers --show-error-context --pretty --no-pretty --color-output "
         "--no-color-output -p= --package= -m= --module= --explicit-package-bases --namespace-packages "
         "--no-namespace-packages --exclude= --config-file=C --no-incremental --incremental --cache-dir=W "
         "--sqlite-cache --junit-xml=W --html-report=W --txt-report=W --xml-report=W --linecount-report=W "
         "--lineprecision-report=W --any-exprs-report=W --cobertura-xml-report=W -v --verbose -V "
         "--no-site-packages --enable-error-code= --disable-error-code= "
         "--warn-unreachable --allow-redefinition --local-partial-types --no-warn-no-return "
         "--soft-error-limit= --show-traceback --tb --raise-exceptions --fast-module-lookup "
         "--disable-bytearray-promotion --disable-memoryview-promotion --extra-checks --strict-equality "
         "--no-implicit-reexport --disallow-any-generics --disallow-subclassing-any --disallow-untyped-calls "
         "--disallow-untyped-decorators --disallow-any-unimported --allow-untyped-globals --scripts-are-modules "
         "--no-silence-site-packages --ignore-missing-imports-per-module --exclude-gitignore")
_RUFF = ("-q --quiet -v --verbose -s --silent --no-cache --isolated --config=C --select= --extend-select= "
         "--ignore= --extend-ignore= --per-file-ignores= --exclude= --extend-exclude= --line-length= "
         "--target-version= --output-format= -o=W --output-file=W --cache-dir=W --statistics --show-fixes "
         "--no-show-fixes --show-files --show-settings --exit-zero --exit-non-zero-on-fix --diff --check "
         "--force-exclude --no-force-exclude --respect-gitignore --no-respect-gitignore --preview --no-preview "
         "-e --exit-zero --fix --no-fix --unsafe-fixes --no-unsafe-fixes --fix-only --watch -n --range= "
         "--stdin-filename= --all --explain --format=")
_ESLINT = ("-c=C --config=C --no-config-lookup --no-eslintrc --ext= --env= --global= --parser-options= "
           "--rule= --no-inline-config --report-unused-disable-directives --max-warnings= -f=C --format=C -o=W "
           "--output-file=W --color --no-color --quiet --cache --cache-location=W --cache-strategy= "
           "--no-error-on-unmatched-pattern --ignore-pattern= --no-ignore --ignore-path= --debug --print-config= "
           "--fix --fix-dry-run --fix-type= --exit-on-fatal-error --pass-on-no-patterns --stats")
_JEST = ("--ci --coverage=? --collectCoverage --watch --watchAll --runInBand -i --verbose --silent --bail=? "
         "-b --testNamePattern= -t= --testPathPattern= --testPathIgnorePatterns= --passWithNoTests --onlyChanged "
         "-o --listTests --json --outputFile=W --coverageDirectory=W --maxWorkers= -w= --no-cache --clearCache "
         "--detectOpenHandles --forceExit --updateSnapshot -u --reporters=C --config=C -c=C --selectProjects= "
         "--testTimeout= --colors --no-colors --run --reporter=C --dir=C --root=C --project= --environment=C "
         "--globals --threads= --no-threads --changed=? --testNamePattern --shard= --exclude= --spec= "
         "--grep= -g= --recursive --exit --timeout= --retries= --parallel --jobs= -j= --forbid-only "
         "--forbid-pending --sort --full-trace --inline-diffs --check-leaks --no-timeouts --extension=")
_TSC = ("--noEmit -p=C --project=C -b --build --pretty --strict --noImplicitAny --strictNullChecks --listFiles "
        "--listEmittedFiles --explainFiles --showConfig --diagnostics --extendedDiagnostics --incremental "
        "--skipLibCheck --target= --module= --moduleResolution= --jsx= --lib= --types= --allowJs --checkJs "
        "--outDir=W --outFile=W --declarationDir=W --tsBuildInfoFile=W --declaration --emitDeclarationOnly "
        "--sourceMap --noUnusedLocals --noUnusedParameters --esModuleInterop --resolveJsonModule --isolatedModules "
        "--traceResolution --locale= --verbose --dry --force --clean -w --watch --all")
_COVERAGE = ("run report html xml json lcov erase combine debug annotate -m= --module -a --append --branch "
             "--concurrency= --context= --include= --omit= --source= -p --parallel-mode --pylib --timid "
             "--rcfile=C --data-file=W -d=W --directory=W -o=W --show-missing --skip-covered --no-skip-covered "
             "--skip-empty --fail-under= --precision= --sort= --format= -i --ignore-errors --title= "
             "--show-contexts --contexts= -q --quiet --keep --pretty-print")
_CARGO = ("test check build clippy doc bench tree metadata run fmt version --release -r --all-targets "
          "--all-features --features= -F= --no-default-features -p= --package= --workspace --all --exclude= "
          "--lib --bins --bin= --tests --test= --benches --bench= --examples --example= -j= --jobs= --locked "
          "--offline --frozen -q --quiet -v -vv --verbose --message-format= --color= --no-fail-fast --no-run "
          "--doc --target=C --profile= --keep-going --timings=? --no-deps --format-version= --depth= "
          "--prefix= -e= --edges= -i= --invert= --duplicates -d --check --all-targets --future-incompat-report "
          "--ignore-rust-version -V")
_GO = ("SINGLE test vet build list version doc env -v -race -run= -skip= -count= -short -timeout= -cover "
       "-covermode= -coverpkg= -coverprofile=W -cpuprofile=W -memprofile=W -blockprofile=W -mutexprofile=W "
       "-trace=W -outputdir=W -bench= -benchmem -benchtime= -failfast -json -p= -parallel= -cpu= -o=W -x -n "
       "-trimpath -tags= -buildvcs= -a -list= -shuffle= -fuzz= -fuzztime= -vet= -work -m -f= -u -e "
       "-deps -test -export -find -compiled -all -short -cmd -src -fullpath")
_NPM = ("test t tst run run-script ls list why help version config get -s --silent -q --quiet --no-color --color= "
        "--if-present --json --long -l --parseable -p --all -a --depth= --omit= --include= --loglevel= "
        "--workspace= -w= --workspaces --ws --include-workspace-root --production --dev "
        "--frozen-lockfile -v --verbose -y --yes --reporter=")
_PIP = ("list show freeze check help debug inspect -q --quiet -v --verbose -V --no-color "
        "--disable-pip-version-check --isolated --no-input --not-required --user "
        "-l --local -e --editable --format= --exclude-editable --include-editable --exclude= -f --files --all "
        "--path= --pre --no-python-version-warning")

LISTS: dict[str, str] = {
    **_GIT,
    "git": "--no-pager -P --bare --no-replace-objects --literal-pathspecs --glob-pathspecs --noglob-pathspecs "
           "--icase-pathspecs --no-optional-locks --no-advice --version --help -h --no-lazy-fetch",
    "ls": _LS,
    "cat": "-A --show-all -b --number-nonblank -e -E --show-ends -n --number -s --squeeze-blank -t -T --show-tabs "
           "-u -v --show-nonprinting",
    "tac": "-b --before -r --regex -s= --separator=",
    "head": _HEAD_TAIL, "tail": _HEAD_TAIL + " -f --follow=? -F --retry --pid= -s= --sleep-interval= "
                                             "--max-unchanged-stats=",
    "wc": "-c --bytes -m --chars -l --lines -w --words -L --max-line-length --total=",
    "grep": _GREP, "egrep": _GREP, "fgrep": _GREP,
    "rg": ("-e= --regexp= -f= --file= -i --ignore-case -s --case-sensitive -S --smart-case -v --invert-match -w "
           "--word-regexp -x --line-regexp -F --fixed-strings -P --pcre2 -U --multiline --multiline-dotall -c "
           "--count --count-matches -l --files-with-matches --files-without-match --files -o --only-matching -n "
           "--line-number -N --no-line-number -H --with-filename -I --no-filename --no-heading --heading -A= "
           "--after-context= -B= --before-context= -C= --context= -m= --max-count= -g= --glob= --iglob= -t= "
           "--type= -T= --type-not= --type-list --hidden -. --no-ignore --no-ignore-vcs --no-ignore-parent "
           "--no-ignore-dot --no-ignore-global --no-ignore-exclude -u -uu -uuu -L --follow -d= --max-depth= "
           "--max-filesize= --color= --colors= -p --pretty --json --vimgrep --column --byte-offset -b -0 --null "
           "-q --quiet --sort= --sortr= -j= --threads= --trim --stats --no-messages -a --text "
           "-E= --encoding= -M= --max-columns= --max-columns-preview --passthru -r= --replace= --null-data "
           "--crlf --no-config --debug --engine= --unrestricted --binary --no-unicode --one-file-system "
           "--line-buffered --block-buffered --field-match-separator= --field-context-separator= "
           "--context-separator= --no-context-separator --path-separator= --glob-case-insensitive"),
    "find": ("SINGLE -H -L -P -D= -O= -name= -iname= -path= -ipath= -wholename= -iwholename= -regex= -iregex= "
             "-regextype= -type= -xtype= -size= -mtime= -mmin= -atime= -amin= -ctime= -cmin= -newer= -anewer= "
             "-cnewer= -used= -user= -group= -uid= -gid= -perm= -links= -inum= -samefile= -lname= -ilname= "
             "-fstype= -context= -printf= -maxdepth= -mindepth= -print -print0 -ls -prune -quit -empty "
             "-executable -readable -writable -true -false -not -a -and -o -or -depth -d -xdev -mount -follow "
             "-noleaf -daystart -nouser -nogroup -delete -ignore_readdir_race -noignore_readdir_race -warn "
             "-nowarn -help -version -fprint=W -fprint0=W -fls=W -fprintf=2 "
             + " ".join(f"-newer{a}{b}=" for a in "amcBt" for b in "amcBt")),
    "fd": ("-H --hidden -I --no-ignore --no-ignore-vcs -u --unrestricted -s --case-sensitive -i --ignore-case -g "
           "--glob --regex -F --fixed-strings -a --absolute-path -l --list-details -L --follow -p --full-path -0 "
           "--print0 -d= --max-depth= --min-depth= --exact-depth= -t= --type= -e= --extension= -E= --exclude= "
           "-S= --size= --changed-within= --changed-before= -o= --owner= -c= --color= -j= --threads= "
           "--max-results= -1 -q --quiet --show-errors --prune --base-directory= --strip-cwd-prefix=? "
           "--one-file-system --format= --no-ignore-parent --path-separator="),
    "sed": ("-n --quiet --silent -e= --expression= -f= --file= -i=? --in-place=? -E -r --regexp-extended -s "
            "--separate -u --unbuffered -z --null-data --posix --debug --sandbox -b --binary --follow-symlinks "
            "-l= --line-length="),
    "awk": "-F= --field-separator= -v= --assign= -e= --source= --posix -P --traditional -c --lint=? -b "
           "--characters-as-bytes -S --sandbox",
    "sort": ("-b --ignore-leading-blanks -d --dictionary-order -f --ignore-case -g --general-numeric-sort -i "
             "--ignore-nonprinting -M --month-sort -h --human-numeric-sort -n --numeric-sort -R --random-sort "
             "-r --reverse -V --version-sort --sort= -c --check=? -C -k= --key= -m --merge -o=W --output=W -s "
             "--stable -S= --buffer-size= -t= --field-separator= -u --unique -z --zero-terminated --parallel= "
             "--debug"),
    "uniq": "-c --count -d --repeated -D --all-repeated=? -f= --skip-fields= --group=? -i --ignore-case -s= "
            "--skip-chars= -u --unique -z --zero-terminated -w= --check-chars=",
    "shuf": "-e --echo -i= --input-range= -n= --head-count= -o=W --output=W -r --repeat -z --zero-terminated",
    "tree": "-a -d -l -f -x -L= -P= -I= --gitignore --prune --filelimit= --noreport -i -q -N -Q -p -u -g -s -h "
            "--si --du -D --timefmt= -F --inodes --device -v -t -c -U -r --dirsfirst --filesfirst --sort= -n -C "
            "-J -X -o=W --charset= --matchdirs --ignore-case -S",
    "cut": "-b= --bytes= -c= --characters= -d= --delimiter= -f= --fields= -n --complement -s --only-delimited "
           "--output-delimiter= " + _TEXT_IN,
    "tr": "-c -C --complement -d --delete -s --squeeze-repeats -t --truncate-set1",
    "nl": "-b= -d= -f= -h= -i= -l= -n= -p -s= -v= -w= --body-numbering= --section-delimiter= --number-width=",
    "paste": "-d= --delimiters= -s --serial " + _TEXT_IN,
    "comm": "-1 -2 -3 --check-order --nocheck-order --output-delimiter= --total " + _TEXT_IN,
    "join": "-a= -e= -i --ignore-case -j= -o= -t= -v= -1= -2= --check-order --nocheck-order --header " + _TEXT_IN,
    "fold": "-b --bytes -s --spaces -w= --width= -NUM",
    "fmt": "-c --crown-margin -p= --prefix= -s --split-only -t --tagged-paragraph -u --uniform-spacing -w= "
           "--width= -g= --goal= -NUM",
    "column": "-t --table -s= --separator= -o= --output-separator= -c= --output-width= -x --fillrows -n -e "
              "-N= --table-columns= -R= -J --json -l= -d",
    "rev": "", "strings": "-a --all -d --data -n= --bytes= -t= --radix= -e= --encoding= -NUM -w -s= -f",
    "od": "-A= -j= -N= -t= -v -w=? -a -b -c -d -f -i -l -o -s -x --address-radix= --skip-bytes= "
          "--read-bytes= --format= --output-duplicates --width=? --endian=",
    "hexdump": "-b -c -C -d -o -x -e= -n= -s= -v -L=?", "xxd": "-a -b -c= -C -E -g= -i -l= -o= -p -r -s= -u -d -e",
    "diff": _DIFF, "cmp": "-b --print-bytes -i= --ignore-initial= -l --verbose -n= --bytes= -s --quiet --silent",
    "stat": "-L --dereference -f --file-system -c= --format= --printf= -t --terse --cached=",
    "du": "-a --all --apparent-size -B= --block-size= -b --bytes -c --total -D --dereference-args -d= "
          "--max-depth= -H -h --human-readable --inodes -k -L --dereference -l --count-links -m -P "
          "--no-dereference -S --separate-dirs --si -s --summarize -t= --threshold= --time=? --time-style= "
          "-x --one-file-system --exclude= -0 --null",
    "df": "-a --all -B= --block-size= -h --human-readable -H --si -i --inodes -k -l --local --output=? -P "
          "--portability --total -t= --type= -T --print-type -x= --exclude-type= --sync --no-sync",
    "basename": "ANY -a --multiple -s= --suffix= -z --zero", "dirname": "ANY -z --zero",
    "realpath": "-e --canonicalize-existing -m --canonicalize-missing -L --logical -P --physical -q --quiet "
                "--relative-to= --relative-base= -s --strip --no-symlinks -z --zero",
    "readlink": "-f --canonicalize -e --canonicalize-existing -m --canonicalize-missing -n --no-newline -q "
                "--quiet -s --silent -v --verbose -z --zero",
    "pwd": "-L -P", "whoami": "", "id": "-a -Z --context -g --group -G --groups -n --name -r --real -u --user -z",
    "uname": "-a --all -s --kernel-name -n --nodename -r --kernel-release -v --kernel-version -m --machine -p "
             "--processor -i --hardware-platform -o --operating-system",
    "which": "-a -s", "jq": ("-r --raw-output -j --join-output -a --ascii-output -c --compact-output -n "
                             "--null-input -s --slurp -e --exit-status -S --sort-keys -C --color-output -M "
                             "--monochrome-output --tab --indent= --arg=2 --argjson=2 --args --jsonargs -R "
                             "--raw-input --raw-output0 --seq --stream --stream-errors --unbuffered"),
    "seq": "ANY -f= --format= -s= --separator= -w --equal-width -NUM", "sleep": "ANY",
    "printenv": "-0 --null", "nproc": "--all --ignore=", "locale": "-a --all-locales -m --charmaps -c "
                                                                 "--category-name -k --keyword-name",
    "getconf": "-a", "expand": "-i --initial -t= --tabs=", "unexpand": "-a --all --first-only -t= --tabs=",
    "numfmt": "--from= --to= --suffix= --padding= --field= --format= --round= --invalid= --header=? -d= "
              "--delimiter= --grouping -z --zero-terminated --from-unit= --to-unit=",
    "md5sum": _SUMS, "sha1sum": _SUMS, "sha256sum": _SUMS, "sha512sum": _SUMS,
    "b2sum": _SUMS + " -l= --length=", "cksum": _SUMS + " -a= --algorithm= --base64 --raw",
    "file": "-b --brief -i --mime --mime-type --mime-encoding -L --dereference -h --no-dereference -z "
            "--uncompress -Z -s --special-files -k --keep-going -0 --print0 -E -N --no-pad -p -r --raw "
            "--extension --apple -e=",
    "date": "-d= --date= -u --utc --universal -I=? --iso-8601=? -R --rfc-email --rfc-3339= -r= --reference= "
            "--debug",
    "hostname": "-f --fqdn --long -s --short -d --domain -i --ip-address -I --all-ip-addresses -A "
                "--all-fqdns",
    # workspace writers (allowed under a confining tier)
    "rm": "-f --force -i -I -r -R --recursive -d --dir -v --verbose --one-file-system --preserve-root=?",
    "rmdir": "-p --parents -v --verbose --ignore-fail-on-non-empty", "unlink": "",
    "mkdir": "-p --parents -v --verbose -m= --mode=",
    "touch": "-a -c --no-create -d= --date= -m -r= --reference= -t= --time= -h --no-dereference",
    "cp": "-a --archive -f --force -i --interactive -n --no-clobber -p --preserve=? --no-preserve= -r -R "
          "--recursive -t= --target-directory= -T --no-target-directory -u --update=? -v --verbose -P -L -H "
          "--no-dereference --dereference --parents --attributes-only --sparse= -x --one-file-system",
    "mv": "-f --force -i --interactive -n --no-clobber -t= --target-directory= -T --no-target-directory -u "
          "--update=? -v --verbose --no-copy --exchange",
    "tee": "-a --append -i --ignore-interrupts -p --output-error=?",
    "truncate": "-c --no-create -o --io-blocks -r= --reference= -s= --size=",
    "tar": "-t --list -v --verbose -f= --file= -z --gzip -j --bzip2 -J --xz --zstd --lzma -a --auto-compress "
           "--index-file=W -O --to-stdout --wildcards --no-wildcards --anchored --no-anchored --exclude= -w "
           "--numeric-owner --full-time --utc --show-transformed-names -x --extract -c --create -C= --directory=",
    "unzip": "-l -v -t -Z -q -qq -z -d= -o -n -j", "zcat": "-f --force -q", "bzcat": "-s -q", "xzcat": "-q -T=",
    "zstdcat": "-q", "gzip": "-c --stdout -d --decompress -l --list -t --test -k --keep -v -q -f -NUM",
    "gunzip": "-c --stdout -l --list -t --test -k --keep -v -q -f", "bzip2": "-c --stdout -d -t -k -v -q -f -NUM",
    "bunzip2": "-c --stdout -t -k -v -q -f", "xz": "-c --stdout -d -l -t -k -v -q -f -T= -NUM",
    "unxz": "-c --stdout -t -k -v -q -f", "zstd": "-c --stdout -d -l -t -k -v -q -f -T= -NUM",
    "unzstd": "-c --stdout -t -k -v -q -f",
    # language tooling
    "python": "-B -b -bb -d -E -I -O -OO -P -q -R -s -S -u -v -x -W= -X= -V --version -h --help -i",
    "pytest": _PYTEST, "py.test": _PYTEST, "mypy": _MYPY, "dmypy": "run check status stop start " + _MYPY,
    "ruff": "check format rule version linter " + _RUFF,
    "pyright": "-p=C --project=C --outputjson --verbose --warnings --pythonversion= --pythonplatform= "
               "--level= --stats --skipunannotated --lib -t= --typeshedpath=",
    "pyflakes": "", "flake8": "--max-line-length= --select= --ignore= --extend-ignore= --extend-select= "
                              "--exclude= --extend-exclude= --count --statistics --show-source --max-complexity= "
                              "--format= -q --quiet -v --config=C --isolated --per-file-ignores= -j= --jobs=",
    "pylint": "--disable= --enable= -d= -e= --rcfile=C --errors-only -E --score= -s= --reports= -r= "
              "--output-format= -f= -j= --jobs= --max-line-length= --fail-under= --ignore= --ignore-patterns= "
              "--recursive=",
    "pycodestyle": "--max-line-length= --select= --ignore= --exclude= --count --statistics --show-source "
                   "--first -q -v",
    "unittest": "-v --verbose -q --quiet -f --failfast -c --catch -b --buffer -k= --locals --durations= "
                "discover -s= --start-directory= -p= --pattern= -t= --top-level-directory=",
    "doctest": "-v -o= -f", "py_compile": "-q", "compileall": "-q -f -l -r= -b -x= -i= -j= -d= --invalidation-mode=",
    "coverage": _COVERAGE,
    "black": "--check --diff --color --no-color -q --quiet -v --verbose -l= --line-length= -t= "
             "--target-version= --skip-string-normalization -S --preview --include= --exclude= "
             "--extend-exclude= --force-exclude= --fast --safe -C --skip-magic-trailing-comma --config=C "
             "--required-version=",
    "isort": "--check --check-only -c --diff --profile= -l= --line-length= -q --quiet -v --verbose "
             "--settings-path=C --sp=C --skip= --skip-glob= --only-modified --color",
    "prettier": "--check -c --list-different -l --write -w --config=C --no-config --ignore-path= "
                "--log-level= --no-color --no-error-on-unmatched-pattern --cache",
    "eslint": _ESLINT, "tsc": _TSC, "jest": _JEST, "vitest": "run " + _JEST, "mocha": _JEST,
    "node": ("STOP --test -e= --eval= -p= --print= --test-reporter=C --test-name-pattern= --test-only "
             "--test-reporter-destination=W --enable-source-maps --no-warnings --trace-warnings "
             "--trace-uncaught --experimental-vm-modules --experimental-strip-types --input-type= "
             "--stack-trace-limit= --unhandled-rejections= -c --check -v --version -h --help "
             "--test-concurrency= --test-timeout= --test-skip-pattern="),
    "nodejs": "STOP --test -e= --eval= -p= --print= -c --check -v --version",
    "npm": _NPM, "yarn": _NPM, "pnpm": _NPM + " -r --recursive --filter= -F=",
    "cargo": _CARGO, "go": _GO, "go run": "SINGLE STOP run -race -tags= -trimpath -v -x -n -a -cover",
    "pip": _PIP, "pip3": _PIP,
    "make": "-k --keep-going -s --silent --quiet -C= --directory= -f= --file= --makefile= -B --always-make -j=? "
            "--jobs=? -l=? --load-average=? -n --just-print --dry-run -q --question",
    "apt": "list show search policy --installed --upgradable -a --all-versions",
    "brew": "list info search --versions", "dnf": "list info search --installed",
    "yum": "list info search", "apk": "info search", "zypper": "search info",
    "snap": "list info", "gem": "list search --local", "conda": "list search info --json -n=",
    "mamba": "list search info --json -n=", "bundle": "list info",
}
# Local repository changes: git.py's lists (the ones a confining tier allows unasked).
LISTS.update({f"git {sub}": text for sub, text in LOCAL_OPTIONS.items() if sub not in ("stash", "branch")})
LISTS["git stash"] += " " + LOCAL_OPTIONS["stash"]
