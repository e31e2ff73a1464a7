"""The accelerator shell and Vivado: a stream PE as an IP (m_axi data ports, s_axilite control), its cocotb
bench, the vendor HLS build, the block-design Tcl and its lint. Desktop only: the board reads the shell's facts from
:mod:`codesign.contracts.shell`."""
