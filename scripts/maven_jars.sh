# Shared steps of the scripts that fetch jars ONCE from Maven Central into a directory of .cache
# with a manifest (scripts/fetch_jars.sh: Delta; scripts/fetch_s3a_jars.sh: S3A). Sourced, not run.
#
# The caller sets: JARS_DIR (target directory), KEY (what is fetched, the manifest's first line),
# SPARK_JARS (PySpark's jars directory: artifacts it ships are not fetched again), M2_REPO, and
# log/die functions. The manifest's first line names what was fetched; the rest are `sha256sum`
# lines of every jar.

MANIFEST_NAME=MANIFEST.sha256
DEPENDENCY_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1

manifest_matches() {
  local manifest=$JARS_DIR/$MANIFEST_NAME listed present
  [ -f "$manifest" ] || return 1
  [ "$(head -n1 "$manifest")" = "# $KEY" ] || return 1
  listed=$(tail -n +2 "$manifest" | awk '{print $2}' | sort)
  present=$(cd "$JARS_DIR" && ls -1 -- *.jar 2>/dev/null | sort)
  [ -n "$listed" ] && [ "$listed" = "$present" ] || return 1
  (cd "$JARS_DIR" && tail -n +2 "$manifest" | sha256sum --check --quiet --strict >/dev/null 2>&1)
}

# Exit 0 when the directory matches its manifest; with --check, exit 1 when it does not.
exit_if_current() {
  if manifest_matches; then
    [ "${1:-}" = "--check" ] ||
      log "up to date: $KEY ($(tail -n +2 "$JARS_DIR/$MANIFEST_NAME" | wc -l) jars in $JARS_DIR)"
    exit 0
  fi
  if [ "${1:-}" = "--check" ]; then
    log "jars in $JARS_DIR do not match $KEY; run 'make bootstrap'"
    exit 1
  fi
}

# resolve_jars WORK GROUP ARTIFACT VERSION: the artifact and its runtime dependency closure, minus
# every artifact PySpark already ships (Spark's own copy comes first on the classpath anyway),
# into WORK/jars.
resolve_jars() {
  local work=$1 group=$2 artifact=$3 version=$4
  command -v mvn >/dev/null || die "mvn not found (Debian package 'maven')"
  mkdir -p "$M2_REPO"
  cat >"$work/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.medallion</groupId>
  <artifactId>$artifact-jars</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>$group</groupId>
      <artifactId>$artifact</artifactId>
      <version>$version</version>
    </dependency>
  </dependencies>
</project>
POM
  # -C: fail on a checksum mismatch instead of warning (Maven verifies the .sha1 of every download).
  local mvn=(mvn -B -q -C -f "$work/pom.xml" -Dmaven.repo.local="$M2_REPO")
  log "resolving $group:$artifact:$version from Maven Central (one time)"
  "${mvn[@]}" "$DEPENDENCY_PLUGIN:list" -DincludeScope=runtime -DoutputFile="$work/deps.txt" \
    >"$work/mvn-list.log" 2>&1 || { cat "$work/mvn-list.log" >&2; die "mvn dependency:list failed"; }
  # deps.txt lines look like "   group:artifact:jar:version:scope" (newer plugins append " -- module ...").
  local deps exclude=() dep aid csv
  mapfile -t deps < <(grep -E '^ +[^ :]+:[^ :]+:jar:' "$work/deps.txt" | awk '{print $1}' | sort -u)
  [ "${#deps[@]}" -gt 0 ] || die "no dependencies listed for $group:$artifact:$version"
  for dep in "${deps[@]}"; do
    aid=$(cut -d: -f2 <<<"$dep")
    if compgen -G "$SPARK_JARS/$aid-[0-9]*.jar" >/dev/null; then exclude+=("$aid"); fi
  done
  csv=$(IFS=,; echo "${exclude[*]}")
  log "PySpark already ships: ${csv:-nothing}"
  "${mvn[@]}" "$DEPENDENCY_PLUGIN:copy-dependencies" -DincludeScope=runtime \
    -DexcludeArtifactIds="$csv" -DoutputDirectory="$work/jars" \
    >"$work/mvn-copy.log" 2>&1 || { cat "$work/mvn-copy.log" >&2; die "mvn dependency:copy-dependencies failed"; }
}

# install_jars WORK: write WORK/jars' manifest and swap the directory in whole, so an interrupted
# fetch never leaves a half-filled jar directory.
install_jars() {
  local work=$1
  {
    echo "# $KEY"
    (cd "$work/jars" && sha256sum -- *.jar)
  } >"$work/jars/$MANIFEST_NAME"
  rm -rf "$JARS_DIR.old"
  [ -d "$JARS_DIR" ] && mv "$JARS_DIR" "$JARS_DIR.old"
  mv "$work/jars" "$JARS_DIR"
  rm -rf "$JARS_DIR.old"
  manifest_matches || die "verification of $JARS_DIR failed after fetching"
  log "fetched $(tail -n +2 "$JARS_DIR/$MANIFEST_NAME" | wc -l) jars for $KEY into $JARS_DIR:"
  tail -n +2 "$JARS_DIR/$MANIFEST_NAME" | awk '{print "  " $2}' >&2
}
