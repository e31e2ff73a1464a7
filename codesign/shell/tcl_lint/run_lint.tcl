# run_lint.tcl -- codesign's Tcl lint driver (recorded, not executed by Vivado).
# tclsh run_lint.tcl SHIM SCRIPT ?shim options...?
# Sources the shim, configures it, then sources SCRIPT. A Tcl error prints
# "codesign-tcl-lint-error:" and the error trace on stderr and exits with 3.
lassign $argv shim script
source $shim
codesign_shim::configure {*}[lrange $argv 2 end]
set argv {}
set argc 0
if {[catch {uplevel #0 [list source $script]} message options]} {
    puts stderr "codesign-tcl-lint-error: $message"
    puts stderr [dict get $options -errorinfo]
    codesign_shim::real_exit 3
}
codesign_shim::record __end__ {}
codesign_shim::real_exit 0
