# vivado_shim.tcl -- part of codesign's Tcl lint (recorded, not executed by Vivado).
#
# Defines the Vivado and Vitis HLS commands that codesign's generated scripts
# use as plain Tcl procedures. Each call is appended to a log (one JSON object
# per line: {"cmd": name, "args": [...]}) and returns a plausible handle, so
# tclsh can run a generated script end to end. This checks Tcl syntax, that
# every command the script calls is one we expect, the order and the
# arguments of the calls; it proves nothing about what Vivado would accept.
# A command the shim does not define stays unknown to tclsh and fails the lint.
#
# Options (set by codesign_shim::configure, see codesign/shell/tcl_lint.py):
#   -log FILE            where the JSON lines go
#   -sandbox DIR         files the script opens for writing are redirected here
#   -board_parts LIST    board parts "installed" (empty: the board files are absent)
#   -run_status TEXT     STATUS of every run after wait_on_run (lint only)
#   -run_progress TEXT   PROGRESS of every run after wait_on_run (lint only)

namespace eval codesign_shim {
    variable log ""
    variable sandbox ""
    variable board_parts {}
    variable run_status "write_bitstream Complete!"
    variable run_progress "100%"
    variable project ""
    variable project_dir ""
    variable bd ""
    variable cells [dict create]
    variable top ""
    variable virtual_files [dict create]
    # options that take a value, so that positional arguments can be told apart
    variable valued_options {
        -of_objects -filter -vlnv -type -rule -config -dict -offset -range -target_address_space
        -fileset -jobs -to_step -files -name -part -dir -boundary_type -objects -value -net -intf_net
        -format -period -argv -flow -mode -vendor -library -version -ipname -display_name -description
        -rtl_language -output -encoding -timeout -of -regexp -intf -from -to
        -root_dir -taxonomy -busif -clock -reset
    }
    variable core ""
}

proc codesign_shim::configure {args} {
    foreach {key value} $args {
        switch -- $key {
            -log { variable log $value }
            -sandbox { variable sandbox $value }
            -board_parts { variable board_parts $value }
            -run_status { variable run_status $value }
            -run_progress { variable run_progress $value }
            default { error "codesign_shim::configure: unknown option $key" }
        }
    }
    variable log
    if {$log eq ""} { error "codesign_shim::configure: -log is required" }
    close [real_open $log w]
}

proc codesign_shim::json_string {text} {
    set out ""
    foreach ch [split $text ""] {
        scan $ch %c code
        if {$ch eq "\""} {
            append out "\\\""
        } elseif {$ch eq "\\"} {
            append out "\\\\"
        } elseif {$code < 0x20 || $code == 0x7f} {
            append out [format "\\u%04x" $code]
        } else {
            append out $ch
        }
    }
    return "\"$out\""
}

proc codesign_shim::record {name arguments} {
    variable log
    set items {}
    foreach item $arguments { lappend items [json_string $item] }
    set fh [real_open $log a]
    fconfigure $fh -encoding utf-8
    puts $fh "\{\"cmd\": [json_string $name], \"args\": \[[join $items {, }]\]\}"
    close $fh
}

# Positional (non-option) arguments of a call.
proc codesign_shim::positional {arguments} {
    variable valued_options
    set out {}
    set skip 0
    foreach item $arguments {
        if {$skip} { set skip 0; continue }
        if {[string match -* $item] && ![string is double -strict $item]} {
            if {$item in $valued_options} { set skip 1 }
            continue
        }
        lappend out $item
    }
    return $out
}

proc codesign_shim::option {arguments name {default ""}} {
    set at [lsearch -exact $arguments $name]
    if {$at < 0 || $at + 1 >= [llength $arguments]} { return $default }
    return [lindex $arguments [expr {$at + 1}]]
}

proc codesign_shim::need_project {command} {
    variable project
    if {$project eq ""} { error "$command: no open project (create_project first)" }
}

proc codesign_shim::need_bd {command} {
    variable bd
    if {$bd eq ""} { error "$command: no block design is open (create_bd_design first)" }
}

# "/cell/pin" or "cell/pin": the cell must exist.
proc codesign_shim::bd_object {command path quiet} {
    need_bd $command
    variable cells
    set clean [string trimleft $path /]
    set cell [lindex [split $clean /] 0]
    if {![dict exists $cells $cell]} {
        if {$quiet} { return "" }
        error "$command: no block-design cell named '$cell' (in '$path')"
    }
    return "/$clean"
}

proc codesign_shim::gen_dir {} {
    variable project_dir
    variable project
    return [file join $project_dir "$project.gen"]
}

# --- Vivado project --------------------------------------------------------------------
proc create_project {args} {
    codesign_shim::record create_project $args
    set pos [codesign_shim::positional $args]
    if {[llength $pos] < 1} { error "create_project: missing project name" }
    if {[codesign_shim::option $args -part] eq ""} { error "create_project: no -part given" }
    set codesign_shim::project [lindex $pos 0]
    set dir [expr {[llength $pos] > 1 ? [lindex $pos 1] : "."}]
    set codesign_shim::project_dir [file normalize $dir]
    return $codesign_shim::project
}
proc current_project {args} {
    codesign_shim::record current_project $args
    codesign_shim::need_project current_project
    return $codesign_shim::project
}
proc close_project {args} {
    codesign_shim::record close_project $args
    set codesign_shim::project ""
    set codesign_shim::core ""
    return ""
}
proc set_param {args} { codesign_shim::record set_param $args; return "" }
proc get_board_parts {args} {
    codesign_shim::record get_board_parts $args
    set found {}
    foreach pattern [codesign_shim::positional $args] {
        foreach part $codesign_shim::board_parts {
            if {[string match $pattern $part]} { lappend found $part }
        }
    }
    return [lsort -unique $found]
}
proc current_fileset {args} { codesign_shim::record current_fileset $args; return "sources_1" }
proc get_runs {args} {
    codesign_shim::record get_runs $args
    codesign_shim::need_project get_runs
    return [codesign_shim::positional $args]
}
proc set_property {args} {
    codesign_shim::record set_property $args
    set pos [codesign_shim::positional $args]
    if {[lsearch -exact $args -dict] >= 0} {
        set values [codesign_shim::option $args -dict]
        if {[llength $values] % 2} { error "set_property -dict: odd number of elements in the property list" }
        if {[llength $pos] < 1} { error "set_property -dict: no object given" }
        return ""
    }
    if {[llength $pos] < 3} { error "set_property: expected name value objects, got [llength $pos] argument(s)" }
    if {[string tolower [lindex $pos 0]] eq "top"} { set codesign_shim::top [lindex $pos 1] }
    return ""
}
proc get_property {args} {
    codesign_shim::record get_property $args
    set pos [codesign_shim::positional $args]
    if {[llength $pos] < 2} { error "get_property: expected a property name and an object" }
    lassign $pos name object
    switch -- [string toupper $name] {
        STATUS { return $codesign_shim::run_status }
        PROGRESS { return $codesign_shim::run_progress }
        DIRECTORY { return [file join $codesign_shim::project_dir "$codesign_shim::project.runs" $object] }
        VLNV { return $object }
        TOP { return $codesign_shim::top }
        default { return "" }
    }
}
proc get_ipdefs {args} {
    codesign_shim::record get_ipdefs $args
    set out {}
    foreach pattern [codesign_shim::positional $args] {
        # a wildcard version stands for whatever Vivado has installed
        lappend out [regsub {:\*$} $pattern {:1.0}]
    }
    return $out
}
proc update_ip_catalog {args} { codesign_shim::record update_ip_catalog $args; return "" }
proc add_files {args} { codesign_shim::record add_files $args; return "" }
proc import_files {args} { codesign_shim::record import_files $args; return "" }
proc get_files {args} {
    codesign_shim::record get_files $args
    set out {}
    foreach pattern [codesign_shim::positional $args] {
        if {$codesign_shim::bd ne "" && [string match $pattern "$codesign_shim::bd.bd"]} {
            lappend out [file join $codesign_shim::project_dir "$codesign_shim::project.srcs" sources_1 bd \
                         $codesign_shim::bd "$codesign_shim::bd.bd"]
        } else {
            lappend out $pattern
        }
    }
    return $out
}
proc generate_target {args} { codesign_shim::record generate_target $args; return "" }
proc launch_runs {args} {
    codesign_shim::record launch_runs $args
    codesign_shim::need_project launch_runs
    set bd $codesign_shim::bd
    if {$bd ne ""} {
        # synthesis generates the block design's output products, hardware handoff included
        dict set codesign_shim::virtual_files [file join [codesign_shim::gen_dir] sources_1 bd $bd hw_handoff "$bd.hwh"] 1
    }
    if {[codesign_shim::option $args -to_step] eq "write_bitstream" && \
            [string match "*Complete!" $codesign_shim::run_status] && $codesign_shim::top ne ""} {
        foreach run [codesign_shim::positional $args] {
            set dir [file join $codesign_shim::project_dir "$codesign_shim::project.runs" $run]
            dict set codesign_shim::virtual_files [file join $dir "$codesign_shim::top.bit"] 1
        }
    }
    return ""
}
proc wait_on_run {args} { codesign_shim::record wait_on_run $args; return "" }

# --- block design ------------------------------------------------------------------------
proc create_bd_design {args} {
    codesign_shim::record create_bd_design $args
    codesign_shim::need_project create_bd_design
    set pos [codesign_shim::positional $args]
    if {[llength $pos] != 1} { error "create_bd_design: expected one design name" }
    set codesign_shim::bd [lindex $pos 0]
    return $codesign_shim::bd
}
proc create_bd_cell {args} {
    codesign_shim::record create_bd_cell $args
    codesign_shim::need_bd create_bd_cell
    set pos [codesign_shim::positional $args]
    if {[llength $pos] != 1} { error "create_bd_cell: expected one cell name, got '$pos'" }
    if {[codesign_shim::option $args -vlnv] eq ""} { error "create_bd_cell: no -vlnv given" }
    set name [lindex $pos 0]
    if {[dict exists $codesign_shim::cells $name]} { error "create_bd_cell: a cell named '$name' exists already" }
    dict set codesign_shim::cells $name [codesign_shim::option $args -vlnv]
    return "/$name"
}
proc get_bd_cells {args} {
    codesign_shim::record get_bd_cells $args
    set quiet [expr {"-quiet" in $args}]
    set out {}
    foreach path [codesign_shim::positional $args] { lappend out [codesign_shim::bd_object get_bd_cells $path $quiet] }
    return $out
}
foreach codesign_shim::command {get_bd_pins get_bd_intf_pins get_bd_addr_segs get_bd_addr_spaces} {
    proc $codesign_shim::command {args} [string map [list @CMD@ $codesign_shim::command] {
        codesign_shim::record @CMD@ $args
        set quiet [expr {"-quiet" in $args}]
        set out {}
        foreach path [codesign_shim::positional $args] {
            if {[string first / [string trimleft $path /]] < 0} { error "@CMD@: '$path' names no pin of a cell" }
            lappend out [codesign_shim::bd_object @CMD@ $path $quiet]
        }
        return $out
    }]
}
foreach codesign_shim::command {apply_bd_automation apply_board_connection connect_bd_net connect_bd_intf_net
                                assign_bd_address validate_bd_design save_bd_design regenerate_bd_layout} {
    proc $codesign_shim::command {args} [string map [list @CMD@ $codesign_shim::command] {
        codesign_shim::record @CMD@ $args
        codesign_shim::need_bd @CMD@
        return ""
    }]
}
proc make_wrapper {args} {
    codesign_shim::record make_wrapper $args
    codesign_shim::need_bd make_wrapper
    set bd $codesign_shim::bd
    return [file join [codesign_shim::gen_dir] sources_1 bd $bd hdl "${bd}_wrapper.v"]
}

proc update_compile_order {args} {
    codesign_shim::record update_compile_order $args
    codesign_shim::need_project update_compile_order
    return ""
}

# --- IP packager (ipx::) ------------------------------------------------------------------------
# package_project needs an open project and makes the current core; every other ipx:: command needs
# that core. Queries answer as a fresh package would: the interfaces named, no memory map, no address
# block and no bus parameter yet (so the script's own "add" branches run).
namespace eval ipx {}
proc ipx::package_project {args} {
    codesign_shim::record ipx::package_project $args
    codesign_shim::need_project ipx::package_project
    foreach flag {-root_dir -vendor -library} {
        if {[codesign_shim::option $args $flag] eq ""} { error "ipx::package_project: no $flag given" }
    }
    set codesign_shim::core [codesign_shim::option $args -root_dir]
    return "core"
}
proc codesign_shim::need_core {command} {
    variable core
    if {$core eq ""} { error "$command: no current IP core (ipx::package_project first)" }
}
foreach codesign_shim::command {current_core infer_bus_interface infer_bus_interfaces associate_bus_interfaces
                                add_bus_parameter add_memory_map add_address_block remove_address_block
                                add_register remove_segment create_xgui_files update_checksums check_integrity
                                save_core get_bus_interfaces get_address_spaces get_memory_maps
                                get_address_blocks get_bus_parameters} {
    proc ipx::$codesign_shim::command {args} [string map [list @CMD@ $codesign_shim::command] {
        codesign_shim::record ipx::@CMD@ $args
        codesign_shim::need_core ipx::@CMD@
        switch -- @CMD@ {
            get_memory_maps - get_address_blocks - get_bus_parameters { return "" }
            get_bus_interfaces - get_address_spaces { return [lindex [codesign_shim::positional $args] 0] }
            add_bus_parameter - add_memory_map - add_address_block - add_register {
                return "@CMD@:[lindex [codesign_shim::positional $args] 0]"
            }
            default { return "core" }
        }
    }]
}

# --- Vitis HLS -----------------------------------------------------------------------------
foreach codesign_shim::command {open_project set_top open_solution set_part create_clock csim_design csynth_design
                                cosim_design export_design config_export config_interface} {
    proc $codesign_shim::command {args} [string map [list @CMD@ $codesign_shim::command] {
        codesign_shim::record @CMD@ $args
        return ""
    }]
}

# --- Tcl built-ins that touch the file system ------------------------------------------------
# `file copy` and `file delete` are recorded, never executed; `file exists`/`isfile` also see the
# files the recorded runs would have produced. Files opened for writing land in the sandbox.
rename file codesign_shim::real_file
proc file {subcommand args} {
    switch -- $subcommand {
        copy - delete - rename {
            codesign_shim::record "file $subcommand" $args
            return ""
        }
        exists - isfile {
            set path [codesign_shim::real_file normalize [lindex $args end]]
            if {[dict exists $codesign_shim::virtual_files $path]} { return 1 }
            return [codesign_shim::real_file $subcommand [lindex $args end]]
        }
        default { return [codesign_shim::real_file $subcommand {*}$args] }
    }
}
rename open codesign_shim::real_open
proc open {path {access r} args} {
    if {[regexp {[wa]} $access] || [lsearch -regexp $access {WRONLY|RDWR|APPEND|CREAT}] >= 0} {
        codesign_shim::record open [list $path $access]
        if {$codesign_shim::sandbox eq ""} { error "open: writing $path is not allowed during the lint" }
        set path [codesign_shim::real_file join $codesign_shim::sandbox [codesign_shim::real_file tail $path]]
    }
    return [codesign_shim::real_open $path $access {*}$args]
}
rename exit codesign_shim::real_exit
proc exit {{status 0}} {
    codesign_shim::record exit [list $status]
    codesign_shim::real_exit $status
}
